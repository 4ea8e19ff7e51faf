package devcluster

import (
	"context"
	"path/filepath"
)

// WriteImages builds our binaries from the source tree and writes the runtime, controller and
// router images as docker-archive tars into dir (default bin/images of the tree), for clusters
// other than this one: `docker load`, `podman load`, `kind load image-archive`, `ctr images
// import`, or `skopeo copy docker-archive:…` to a registry. It returns the archives' paths.
func WriteImages(ctx context.Context, cfg Config, dir string) ([]string, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if _, err := c.repoRoot(); err != nil {
		return nil, err
	}
	if dir == "" {
		dir = filepath.Join(c.RepoRoot, "bin", "images")
	}
	if err := c.buildOurs(ctx); err != nil {
		return nil, err
	}
	paths, _, err := c.writeImages(dir, "runtime", "controller", "router")
	return paths, err
}
