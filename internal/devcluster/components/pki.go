package components

import (
	"context"
	"fmt"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/pki"
)

// pkiStep makes the certificates and kubeconfigs once; they stay (`down --purge` removes them).
type pkiStep struct{ env Env }

func (pkiStep) Name() string { return "pki" }

func (s pkiStep) Up(context.Context) error {
	if err := pki.Ensure(s.env.Cfg); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	return nil
}

func (pkiStep) Down(context.Context) error { return nil }
