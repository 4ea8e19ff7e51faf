package execapi_test

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/sandboxdtest"
)

func BenchmarkExecRoundTrip(b *testing.B) {
	e := sandboxdtest.New(b)
	body := []byte(`{"argv":["true"]}`)
	client := e.TS.Client()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Post(e.TS.URL+"/v1/exec", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(out), `"exitCode":0`) {
			b.Fatalf("%d %s", resp.StatusCode, out)
		}
	}
}
