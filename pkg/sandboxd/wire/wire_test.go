package wire

import (
	"encoding/json"
	"reflect"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestFrameJSON(t *testing.T) {
	tests := []struct {
		f    Frame
		want string
	}{
		{Frame{Type: FrameStdout, Data: []byte("hi\n")}, `{"type":"stdout","data":"aGkK"}`},
		{Frame{Type: FrameStderr, Data: nil}, `{"type":"stderr","data":null}`},
		{Frame{Type: FrameExit}, `{"type":"exit","exitCode":0,"timedOut":false}`},
		{Frame{Type: FrameExit, ExitCode: 124, TimedOut: true, Data: []byte("x")}, `{"type":"exit","exitCode":124,"timedOut":true}`},
		{Frame{Type: FrameError, Error: "boom"}, `{"type":"error","error":"boom"}`},
		{Frame{Type: FrameSignal, Signal: "SIGINT"}, `{"type":"signal","signal":"SIGINT"}`},
		{Frame{Type: FrameResize, Cols: 100, Rows: 30}, `{"type":"resize","cols":100,"rows":30}`},
		{Frame{Type: FrameStdinEOF}, `{"type":"stdin_eof"}`},
	}
	for _, tc := range tests {
		b, err := json.Marshal(tc.f)
		if err != nil || string(b) != tc.want {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", tc.f, b, err, tc.want)
		}
		var back Frame
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		again, _ := json.Marshal(back)
		if string(again) != tc.want {
			t.Errorf("round trip of %s gave %s", tc.want, again)
		}
	}
}

func TestExecRequestOmitsUnset(t *testing.T) {
	b, _ := json.Marshal(ExecRequest{Argv: []string{"ls"}})
	if string(b) != `{"argv":["ls"]}` {
		t.Fatalf("%s", b)
	}
	var m map[string]any
	b, _ = json.Marshal(Process{ID: "p-1"})
	_ = json.Unmarshal(b, &m)
	if v, ok := m["exitCode"]; !ok || v != nil {
		t.Fatalf("exitCode must be null while running: %s", b)
	}
	if !reflect.DeepEqual(m["running"], false) {
		t.Fatalf("%s", b)
	}
}
