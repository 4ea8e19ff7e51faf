package nodeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent/imagestore"
	"github.com/agent-sandbox/agent-sandbox/internal/noredirect"
)

// DefaultPort is where the agent listens on each node's address (host network).
const DefaultPort = 9472

// Client calls the node agent of a node, as the controller.
type Client struct {
	Port int
	// TokenFile holds the controller's token for Audience (a projected token the kubelet renews).
	TokenFile string
	HTTP      *http.Client
}

// NewClient is a client with a bounded HTTP client (a checkpoint of a large sandbox takes
// seconds) that never follows a redirect: whatever answers at a node's port gets no second
// request carrying the controller's token elsewhere.
func NewClient(port int, tokenFile string) *Client {
	return &Client{Port: port, TokenFile: tokenFile, HTTP: noredirect.Client(&http.Client{Timeout: 2 * time.Minute})}
}

// Checkpoint asks the agent at hostIP to save the pod.
func (c *Client) Checkpoint(ctx context.Context, hostIP string, req CheckpointRequest) (CheckpointResult, error) {
	var res CheckpointResult
	return res, c.call(ctx, hostIP, CheckpointPath, req, &res)
}

// Delete asks the agent at hostIP to delete a Sandbox's image.
func (c *Client) Delete(ctx context.Context, hostIP, sandboxUID string) (DeleteResult, error) {
	var res DeleteResult
	return res, c.call(ctx, hostIP, DeletePath, DeleteRequest{SandboxUID: sandboxUID}, &res)
}

func (c *Client) call(ctx context.Context, hostIP, path string, in, out any) error {
	token, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return fmt.Errorf("the node agent's token: %w", err)
	}
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	url := "http://" + net.JoinHostPort(hostIP, strconv.Itoa(c.Port)) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return imagestore.Errorf(imagestore.ReasonFailed, "calling the node agent at %s: %v", hostIP, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e ErrorBody
		if json.NewDecoder(resp.Body).Decode(&e) != nil || e.Reason == "" {
			e = ErrorBody{Reason: imagestore.ReasonFailed, Message: resp.Status}
		}
		return imagestore.Errorf(e.Reason, "node agent at %s: %s", hostIP, e.Message)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
