package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFromBuild(t *testing.T) {
	stamped := &debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}}}
	devel := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}
	tests := []struct {
		name                  string
		version, commit, date string
		bi                    *debug.BuildInfo
		want                  Info
	}{
		{name: "the toolchain's stamps when nothing was linked in", bi: stamped,
			want: Info{Version: "v0.3.0", Commit: "abc123", BuildDate: "2026-01-02T03:04:05Z"}},
		{name: "link-time values win over the stamps", version: "v9", commit: "fff", date: "today", bi: stamped,
			want: Info{Version: "v9", Commit: "fff", BuildDate: "today"}},
		{name: "a devel build without VCS stamps reads unknown", bi: devel,
			want: Info{Version: "unknown", Commit: "unknown", BuildDate: "unknown"}},
		{name: "no build info at all reads unknown",
			want: Info{Version: "unknown", Commit: "unknown", BuildDate: "unknown"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := fromBuild(tc.version, tc.commit, tc.date, tc.bi)
			tc.want.GoVersion, tc.want.Compiler, tc.want.Platform = runtime.Version(), runtime.Compiler, runtime.GOOS+"/"+runtime.GOARCH
			if got != tc.want {
				t.Errorf("fromBuild = %+v, want %+v", got, tc.want)
			}
		})
	}
}
