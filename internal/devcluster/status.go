package devcluster

import (
	"context"
	"io"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/components"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// Status reports each process of the cluster and whether it answers its health check.
func Status(ctx context.Context, cfg spec.Config) ([]components.ComponentStatus, error) {
	c, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	return components.Status(ctx, components.NewEnv(c)), nil
}

// PrintStatus writes the status as a table.
func PrintStatus(w io.Writer, sts []components.ComponentStatus, cfg spec.Config) {
	c, err := cfg.WithDefaults()
	if err != nil {
		return
	}
	components.PrintStatus(w, sts, components.NewEnv(c))
}
