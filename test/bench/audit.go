package bench

import (
	"bufio"
	"encoding/json"
	"os"
	"time"
)

// auditEvent is the part of an audit.k8s.io/v1 Event we count.
type auditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	StageTimestamp time.Time `json:"stageTimestamp"`
}

// readAudit returns the completed write events logged in [from, to].
func readAudit(path string, from, to time.Time) ([]auditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Stage != "ResponseComplete" {
			continue
		}
		if e.StageTimestamp.Before(from) || e.StageTimestamp.After(to) {
			continue
		}
		out = append(out, e)
	}
	return out, sc.Err()
}
