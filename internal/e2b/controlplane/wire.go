package controlplane

import "encoding/json"

// The JSON of E2B's REST API (the schemas of its OpenAPI document, as e2b 2.51.0 reads them).

// newSandbox is the body of POST /sandboxes and POST /v2/sandboxes.
type newSandbox struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int64            `json:"timeout,omitempty"`
	AutoPause           *bool             `json:"autoPause,omitempty"`
	AutoPauseMemory     *bool             `json:"autoPauseMemory,omitempty"`
	AutoResume          json.RawMessage   `json:"autoResume,omitempty"`
	Secure              *bool             `json:"secure,omitempty"`
	AllowInternetAccess *bool             `json:"allow_internet_access,omitempty"`
	Network             json.RawMessage   `json:"network,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	EnvVars             map[string]string `json:"envVars,omitempty"`
	Mcp                 json.RawMessage   `json:"mcp,omitempty"`
	VolumeMounts        json.RawMessage   `json:"volumeMounts,omitempty"`
	Iam                 json.RawMessage   `json:"iam,omitempty"`
}

// sandboxJSON answers create and connect.
type sandboxJSON struct {
	TemplateID      string  `json:"templateID"`
	SandboxID       string  `json:"sandboxID"`
	Alias           string  `json:"alias,omitempty"`
	ClientID        string  `json:"clientID"`
	EnvdVersion     string  `json:"envdVersion"`
	EnvdAccessToken string  `json:"envdAccessToken,omitempty"`
	Domain          *string `json:"domain"`
}

// listedSandbox is one item of GET /v2/sandboxes.
type listedSandbox struct {
	TemplateID  string            `json:"templateID"`
	Alias       string            `json:"alias,omitempty"`
	SandboxID   string            `json:"sandboxID"`
	ClientID    string            `json:"clientID"`
	StartedAt   string            `json:"startedAt"`
	EndAt       string            `json:"endAt"`
	CPUCount    int64             `json:"cpuCount"`
	MemoryMB    int64             `json:"memoryMB"`
	DiskSizeMB  int64             `json:"diskSizeMB"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	State       string            `json:"state"`
	EnvdVersion string            `json:"envdVersion"`
}

// sandboxDetail answers GET /sandboxes/{id}.
type sandboxDetail struct {
	listedSandbox
	EnvdAccessToken string  `json:"envdAccessToken,omitempty"`
	Domain          *string `json:"domain"`
}

// timeoutBody is the body of POST /sandboxes/{id}/timeout and the connect/resume bodies.
type timeoutBody struct {
	Timeout   *int64 `json:"timeout,omitempty"`
	Memory    *bool  `json:"memory,omitempty"`
	AutoPause *bool  `json:"autoPause,omitempty"`
}

// pauseBody is the body of POST /sandboxes/{id}/pause.
type pauseBody struct {
	Memory *bool `json:"memory,omitempty"`
}

// errorJSON is E2B's error shape.
type errorJSON struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

const (
	stateRunning = "running"
	statePaused  = "paused"
	clientID     = "agent-sandbox"
)
