package devcluster

import (
	"context"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/components"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// WriteImages builds our binaries from the source tree and writes the runtime, controller and
// router images as docker-archive tars into dir (default bin/images of the tree), for clusters
// other than this one: `docker load`, `podman load`, `kind load image-archive`, `ctr images
// import`, or `skopeo copy docker-archive:…` to a registry. It returns the archives' paths.
func WriteImages(ctx context.Context, cfg spec.Config, dir string) ([]string, error) {
	c, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	return components.WriteImages(ctx, components.NewEnv(c), dir)
}
