package sandboxclaim

import (
	"context"
	"fmt"

	"k8s.io/client-go/tools/record"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// pass is one reconcile of one claim: the claim as read, the status it builds up, and what
// waits for that status to be written — events (so nobody reads of a change the API does not
// show yet) and a follow-up write.
type pass struct {
	claim, original *extv1beta1.SandboxClaim
	// sandbox is the claim's Sandbox, once found or acquired.
	sandbox *agentsv1beta1.Sandbox
	events  []pendingEvent
	// afterWrite runs once the status is written (a foreground delete shows the expired status
	// first).
	afterWrite func(context.Context) error
	// claimDeleted: the claim was deleted outright, so there is no status to write.
	claimDeleted bool
}

type pendingEvent struct{ eventType, reason, message string }

func (p *pass) event(eventType, reason, format string, args ...any) {
	p.events = append(p.events, pendingEvent{eventType, reason, fmt.Sprintf(format, args...)})
}

func (p *pass) emit(rec record.EventRecorder) {
	for _, e := range p.events {
		rec.Event(p.claim, e.eventType, e.reason, e.message)
	}
}
