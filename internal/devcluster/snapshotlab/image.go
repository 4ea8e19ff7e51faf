package snapshotlab

import (
	"io/fs"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/images"
)

// ImageRef is the name the lab's image has in its containerd.
const ImageRef = "docker.io/agent-sandbox/snapshot-lab:dev"

// WorkloadImage is a one-binary image: the workload (built static from ./workload) as its
// entrypoint, run as root so that it may write its state directories.
func WorkloadImage(workloadBin string) *images.Image {
	return &images.Image{
		Ref:        ImageRef,
		Entrypoint: []string{"/workload", "serve"},
		Env:        []string{"PATH=/"},
		WorkingDir: "/",
		Files: []images.File{
			{Path: "/workload", Mode: 0o755, Src: workloadBin},
			{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
			{Path: "/var", Mode: fs.ModeDir | 0o755},
			{Path: "/pvc", Mode: fs.ModeDir | 0o755},
		},
	}
}
