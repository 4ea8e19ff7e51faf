// Package buildinfo says which build a binary is — version, commit, build date, Go toolchain and
// platform — for the *_build_info series every binary exports.
package buildinfo

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Set at link time (go build -ldflags "-X github.com/agent-sandbox/agent-sandbox/internal/buildinfo.Version=v1.2.3");
// when empty, what the Go toolchain stamped into the binary (module version, VCS revision and
// time) is used instead.
var (
	Version   string
	Commit    string
	BuildDate string
)

// Info is one build's identity.
type Info struct {
	Version, Commit, BuildDate, GoVersion, Compiler, Platform string
}

// Get returns this binary's build identity; unknown parts read "unknown".
func Get() Info {
	return fromBuild(Version, Commit, BuildDate, readBuildInfo())
}

func readBuildInfo() *debug.BuildInfo {
	bi, _ := debug.ReadBuildInfo()
	return bi
}

// fromBuild prefers the link-time values and falls back to the toolchain's stamps.
func fromBuild(version, commit, date string, bi *debug.BuildInfo) Info {
	info := Info{Version: version, Commit: commit, BuildDate: date, GoVersion: runtime.Version(),
		Compiler: runtime.Compiler, Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		if info.Version == "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && info.Commit == "":
				info.Commit = s.Value
			case s.Key == "vcs.time" && info.BuildDate == "":
				info.BuildDate = s.Value
			}
		}
	}
	for _, f := range []*string{&info.Version, &info.Commit, &info.BuildDate} {
		if *f == "" {
			*f = "unknown"
		}
	}
	return info
}

// Labels are upstream's label names for the build info series.
func (i Info) Labels() prometheus.Labels {
	return prometheus.Labels{
		"git_version": i.Version, "git_commit": i.Commit, "build_date": i.BuildDate,
		"go_version": i.GoVersion, "compiler": i.Compiler, "platform": i.Platform,
	}
}

// NewCollector is a constant 1 named name whose labels say which build this is.
func NewCollector(name, help string) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: Get().Labels()},
		func() float64 { return 1 })
}
