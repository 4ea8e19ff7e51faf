package devcluster

import (
	"context"
	"io"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/components"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// ComponentStatus is one line of `dev status`.
type ComponentStatus = components.ComponentStatus

// Status reports each process of the cluster and whether it answers its health check.
func Status(ctx context.Context, cfg spec.Config) ([]ComponentStatus, error) {
	c, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	return components.Status(ctx, components.New(c))
}

// PrintStatus writes the status as a table.
func PrintStatus(w io.Writer, sts []ComponentStatus, cfg spec.Config) {
	c, err := cfg.WithDefaults()
	if err != nil {
		return
	}
	components.PrintStatus(w, sts, components.New(c))
}
