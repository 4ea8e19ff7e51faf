package images

import (
	"errors"
	"strings"
	"testing"
)

func TestPythonFilesIncludeInterpreterStdlibAndLoader(t *testing.T) {
	files, err := Python()
	if errors.Is(err, ErrNoPython) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"/usr/bin/python3": false, "/lib64/ld-linux-x86-64.so.2": false}
	stdlib := false
	for _, f := range files {
		if _, ok := want[f.Path]; ok {
			want[f.Path] = true
		}
		stdlib = stdlib || strings.HasSuffix(f.Path, "/json/__init__.py")
		if strings.Contains(f.Path, "/test/") || strings.Contains(f.Path, "/tkinter/") {
			t.Fatalf("skipped part of the stdlib copied: %s", f.Path)
		}
	}
	for p, ok := range want {
		if !ok {
			t.Errorf("%s missing", p)
		}
	}
	if !stdlib {
		t.Error("json package of the stdlib missing")
	}
}
