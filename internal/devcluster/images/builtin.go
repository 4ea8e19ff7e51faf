package images

import (
	"fmt"
	"io/fs"
	"os/exec"
	"path"
	"strings"
)

const basePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// RuntimeUID and RuntimeGID are the unprivileged user the runtime image runs sandboxd (and so
// every command) as: "sandbox", home /home/sandbox, owner of /workspace.
const (
	RuntimeUID = 1000
	RuntimeGID = 1000
)

// Runtime is the sandbox runtime image: sandboxd as the entrypoint (modern /v1 and legacy :8888
// API on one port, rooted at /workspace) over a busybox userland, so that `sh -c`, coreutils,
// `sleep infinity` and the like work for commands, kube exec and hooks. extra files (such as
// Python's) are added on top. It runs as RuntimeUID and needs to write only /workspace and /tmp,
// so it works under readOnlyRootFilesystem with volumes there.
func Runtime(ref, sandboxdPath, busyboxPath string, extra ...File) (*Image, error) {
	files, err := busybox(busyboxPath)
	if err != nil {
		return nil, err
	}
	files = append(files,
		File{Path: "/usr/local/bin/sandboxd", Mode: 0o755, Src: sandboxdPath},
		File{Path: "/etc/passwd", Mode: 0o644, Data: []byte(fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\n"+
			"sandbox:x:%d:%d:sandbox:/home/sandbox:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n", RuntimeUID, RuntimeGID))},
		File{Path: "/etc/group", Mode: 0o644, Data: []byte(fmt.Sprintf("root:x:0:\nsandbox:x:%d:\nnogroup:x:65534:\n", RuntimeGID))},
		File{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		File{Path: "/root", Mode: fs.ModeDir | 0o700},
		File{Path: "/workspace", Mode: fs.ModeDir | 0o755, UID: RuntimeUID, GID: RuntimeGID},
		File{Path: "/home", Mode: fs.ModeDir | 0o755},
		File{Path: "/home/sandbox", Mode: fs.ModeDir | 0o755, UID: RuntimeUID, GID: RuntimeGID},
	)
	files = append(files, extra...)
	return &Image{
		Ref:        ref,
		Entrypoint: []string{"/usr/local/bin/sandboxd", "--listen", ":8888", "--root", "/workspace"},
		Env:        []string{basePath, "HOME=/home/sandbox"},
		WorkingDir: "/workspace",
		User:       fmt.Sprintf("%d:%d", RuntimeUID, RuntimeGID),
		Ports:      []int{8888, 9090, 49983}, // sandboxd: its API, upstream's gRPC port, E2B's envd
		Files:      files,
	}, nil
}

// Pause is the pod sandbox image containerd starts first in every pod.
func Pause(ref, pausePath string) *Image {
	return &Image{
		Ref:        ref,
		Entrypoint: []string{"/pause"},
		Env:        []string{basePath},
		WorkingDir: "/",
		Files:      []File{{Path: "/pause", Mode: 0o755, Src: pausePath}},
	}
}

// nonRoot is the user our server images run as (the "nonroot" of distroless images).
const nonRoot = "65532:65532"

// Server is the image of one of our static Go servers (controller, router): the binary alone
// as the entrypoint, run as an unprivileged user; no shell, nothing else to attack.
func Server(ref, binPath string, ports ...int) *Image {
	bin := "/usr/local/bin/" + path.Base(binPath)
	return &Image{
		Ref:        ref,
		Entrypoint: []string{bin},
		Env:        []string{basePath},
		WorkingDir: "/",
		User:       nonRoot,
		Ports:      ports,
		Files: []File{
			{Path: bin, Mode: 0o755, Src: binPath},
			{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
			{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnonroot:x:65532:\n")},
			{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		},
	}
}

// busybox installs the static busybox at /bin/busybox with a symlink per applet, at the paths
// the binary itself lists (--list-full), like `busybox --install -s` would inside the image.
func busybox(busyboxPath string) ([]File, error) {
	out, err := exec.Command(busyboxPath, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("listing busybox applets (%s): %w; install busybox-static", busyboxPath, err)
	}
	files := []File{{Path: "/bin/busybox", Mode: 0o755, Src: busyboxPath}}
	for _, applet := range strings.Fields(string(out)) {
		p := "/" + applet
		if p == "/bin/busybox" {
			continue
		}
		rel, _ := relTo(path.Dir(p), "/bin/busybox")
		files = append(files, File{Path: p, Link: rel})
	}
	return files, nil
}

// relTo makes a relative symlink target from dir to target (both absolute), so links resolve
// the same inside the container and when the layer is inspected on the host.
func relTo(dir, target string) (string, error) {
	d := strings.Split(strings.Trim(dir, "/"), "/")
	t := strings.Split(strings.Trim(target, "/"), "/")
	if d[0] == "" {
		d = nil
	}
	i := 0
	for i < len(d) && i < len(t)-1 && d[i] == t[i] {
		i++
	}
	return strings.Repeat("../", len(d)-i) + strings.Join(t[i:], "/"), nil
}
