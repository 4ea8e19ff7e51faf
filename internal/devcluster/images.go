package devcluster

import (
	"context"
	"io"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/components"
)

// WriteImages builds our binaries from the source tree and writes the runtime, controller and
// router images as docker-archive tars into dir (default bin/images of the tree), for clusters
// other than this one: `docker load`, `podman load`, `kind load image-archive`, `ctr images
// import`, or `skopeo copy docker-archive:…` to a registry. It returns the archives' paths.
func WriteImages(ctx context.Context, cfg Config, dir string) ([]string, error) {
	c, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	return components.New(c).WriteImages(ctx, dir)
}

// ComponentStatus is one line of `dev status`.
type ComponentStatus = components.ComponentStatus

// Status reports each process of the cluster and whether it answers its health check.
func Status(ctx context.Context, cfg Config) ([]ComponentStatus, error) {
	c, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	return components.Status(ctx, components.New(c))
}

// PrintStatus writes the status as a table.
func PrintStatus(w io.Writer, sts []ComponentStatus, cfg Config) {
	c, err := cfg.WithDefaults()
	if err != nil {
		return
	}
	components.PrintStatus(w, sts, components.New(c))
}
