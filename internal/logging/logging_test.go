package logging_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"

	"github.com/agent-sandbox/agent-sandbox/internal/logging"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// parse binds the flags on a fresh FlagSet and parses args into new options.
func parse(format string, args ...string) (*logging.Options, error) {
	o := logging.NewOptions(format)
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.BindFlags(fs)
	return o, fs.Parse(args)
}

// jsonLines decodes one JSON object per line.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

func TestVerbosityChoosesTheLinesWritten(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // messages written, of: error warn info v1 … v5
	}{
		{"default: info and above", nil, "error warn info"},
		{"-v=2 adds V(1) and V(2)", []string{"-v=2"}, "error warn info v1 v2"},
		{"--v=5 adds every V line", []string{"--v=5"}, "error warn info v1 v2 v3 v4 v5"},
		{"--log-level=debug is -v=4", []string{"--log-level=debug"}, "error warn info v1 v2 v3 v4"},
		{"--log-level=3 is -v=3", []string{"--log-level=3"}, "error warn info v1 v2 v3"},
		{"--log-level=warn drops info", []string{"--log-level=warn"}, "error warn"},
		{"--log-level=error drops warnings", []string{"--log-level", "error"}, "error"},
		{"the last level flag wins", []string{"--log-level=error", "-v=1"}, "error warn info v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(logging.FormatJSON, tt.args...)
			if err != nil {
				t.Fatalf("parse %v: %v", tt.args, err)
			}
			var buf bytes.Buffer
			h := o.Handler(&buf)
			log := logr.FromSlogHandler(h)
			log.Error(nil, "error")
			slog.New(h).Warn("warn")
			log.Info("info")
			for v := 1; v <= 5; v++ {
				log.V(v).Info(fmt.Sprintf("v%d", v))
			}
			var got []string
			for _, l := range jsonLines(t, buf.String()) {
				got = append(got, fmt.Sprint(l["msg"]))
			}
			if strings.Join(got, " ") != tt.want {
				t.Fatalf("with %v wrote %q, want %q", tt.args, strings.Join(got, " "), tt.want)
			}
		})
	}
}

func TestVLinesAreInfoWithTheirVerbosity(t *testing.T) {
	o, err := parse(logging.FormatJSON, "-v=3")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	logr.FromSlogHandler(o.Handler(&buf)).V(3).Info("decision", "sandbox", "ns/a")
	line := jsonLines(t, buf.String())[0]
	if line["level"] != "INFO" || line["v"] != float64(3) || line["sandbox"] != "ns/a" {
		t.Fatalf(`got %v, want level INFO, "v": 3 and the key/value`, line)
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		name     string
		def      string
		args     []string
		wantLine string
	}{
		{"the binary's default json", logging.FormatJSON, nil, `"msg":"hello","k":"v"}`},
		{"the binary's default text", logging.FormatText, nil, `level=INFO msg=hello k=v`},
		{"--logging-format=text", logging.FormatJSON, []string{"--logging-format=text"}, `level=INFO msg=hello k=v`},
		{"--logging-format=json", logging.FormatText, []string{"--logging-format=json"}, `"msg":"hello","k":"v"}`},
		{"--log-format is an alias", logging.FormatJSON, []string{"--log-format=text"}, `level=INFO msg=hello k=v`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(tt.def, tt.args...)
			if err != nil {
				t.Fatalf("parse %v: %v", tt.args, err)
			}
			var buf bytes.Buffer
			slog.New(o.Handler(&buf)).Info("hello", "k", "v")
			if !strings.Contains(buf.String(), tt.wantLine) {
				t.Fatalf("wrote %q, want it to contain %q", buf.String(), tt.wantLine)
			}
		})
	}
}

func TestBadFlagValuesAreRefused(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"a format other than json or text", []string{"--logging-format=xml"}, `want json or text, not "xml"`},
		{"an unknown level name", []string{"--log-level=loud"}, `want debug, info, warn, error or a number, not "loud"`},
		{"a negative verbosity", []string{"-v=-1"}, `want a number 0 or above, not "-1"`},
		{"a verbosity that is no number", []string{"-v=high"}, `want a number 0 or above, not "high"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(logging.FormatJSON, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("parse %v: error %v, want one containing %q", tt.args, err, tt.wantErr)
			}
		})
	}
}

func TestVerbosityReportsTheV(t *testing.T) {
	tests := []struct {
		args []string
		want int
	}{
		{nil, 0},
		{[]string{"-v=2"}, 2},
		{[]string{"--log-level=debug"}, 4},
		{[]string{"--log-level=error"}, 0},
	}
	for _, tt := range tests {
		o, err := parse(logging.FormatJSON, tt.args...)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.Verbosity(); got != tt.want {
			t.Errorf("%v: Verbosity() = %d, want %d", tt.args, got, tt.want)
		}
	}
}

func TestContextCarriesTheRequestLogger(t *testing.T) {
	o := logging.NewOptions(logging.FormatJSON)
	var buf bytes.Buffer
	fallback := slog.New(o.Handler(&buf))
	if got := logging.FromContext(context.Background(), fallback); got != fallback {
		t.Fatal("FromContext of a context without a logger did not return the fallback")
	}
	ctx := logging.IntoContext(context.Background(), fallback.With("request", "r1"))
	logging.FromContext(ctx, fallback).Info("served")
	if line := jsonLines(t, buf.String())[0]; line["request"] != "r1" {
		t.Fatalf("got %v, want the context logger's request=r1", line)
	}
}
