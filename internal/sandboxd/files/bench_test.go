package files_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/sandboxdtest"
)

var mib = bytes.Repeat([]byte("0123456789abcdef"), 1<<16)

func BenchmarkFileWrite1MiB(b *testing.B) {
	e := sandboxdtest.New(b)
	client := e.TS.Client()
	b.SetBytes(int64(len(mib)))
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequestWithContext(context.Background(), "PUT", e.TS.URL+"/v1/files/bench/blob", bytes.NewReader(mib))
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

func BenchmarkFileRead1MiB(b *testing.B) {
	e := sandboxdtest.New(b)
	e.WriteFile("bench/blob", string(mib))
	client := e.TS.Client()
	b.SetBytes(int64(len(mib)))
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Get(e.TS.URL + "/v1/files/bench/blob")
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n != int64(len(mib)) {
			b.Fatalf("read %d bytes", n)
		}
	}
}
