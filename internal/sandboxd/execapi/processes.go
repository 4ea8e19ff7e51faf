package execapi

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

func (h *Handler) StartProcess(w http.ResponseWriter, r *http.Request) {
	sp, err := h.readExecRequest(r, 0) // no default timeout: it outlives the request
	if err != nil {
		respond.Fail(w, h.logOf(r), err)
		return
	}
	p, err := h.procs.startProcess(sp)
	if err != nil {
		respond.Fail(w, h.logOf(r), err)
		return
	}
	h.log.Info("background process started", "id", p.id, "pid", p.pid)
	respond.JSON(w, http.StatusCreated, wire.StartProcessResponse{ID: p.id, PID: p.pid})
}

func (h *Handler) ListProcesses(w http.ResponseWriter, r *http.Request) {
	h.procs.mu.Lock()
	procs := make([]*backgroundProcess, 0, len(h.procs.m))
	for _, p := range h.procs.m {
		procs = append(procs, p)
	}
	h.procs.mu.Unlock()
	slices.SortFunc(procs, func(a, b *backgroundProcess) int {
		if c := a.startedAt.Compare(b.startedAt); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	out := wire.ProcessList{Processes: make([]wire.Process, 0, len(procs))}
	for _, p := range procs {
		out.Processes = append(out.Processes, p.info())
	}
	respond.JSON(w, http.StatusOK, out)
}

// processArg splits "{id}" or "{id}/{action}" and finds the process.
func (h *Handler) processArg(w http.ResponseWriter, arg string) (*backgroundProcess, string, bool) {
	id, action, _ := strings.Cut(arg, "/")
	p := h.procs.get(id)
	if p == nil {
		respond.Error(w, http.StatusNotFound, "process not found")
		return nil, "", false
	}
	return p, action, true
}

// GetProcess serves GET /v1/processes/{id} and /v1/processes/{id}/logs.
func (h *Handler) GetProcess(w http.ResponseWriter, r *http.Request, arg string) {
	p, action, ok := h.processArg(w, arg)
	if !ok {
		return
	}
	switch action {
	case "":
		respond.JSON(w, http.StatusOK, p.info())
	case "logs":
		if r.URL.Query().Get("follow") == "true" {
			h.followLogs(w, r, p)
			return
		}
		p.mu.Lock()
		stdout, _, lostOut := p.out[0].readFrom(0)
		stderr, _, lostErr := p.out[1].readFrom(0)
		p.mu.Unlock()
		respond.JSON(w, http.StatusOK, wire.ProcessLogs{
			Stdout: string(stdout), Stderr: string(stderr),
			StdoutTruncated: lostOut, StderrTruncated: lostErr,
		})
	default:
		respond.Error(w, http.StatusNotFound, "not found")
	}
}

// followLogs streams retained and new output as NDJSON frames until the
// process exits (then an exit frame) or the client leaves.
func (h *Handler) followLogs(w http.ResponseWriter, r *http.Request, p *backgroundProcess) {
	nw := respond.NDJSON(w)
	var off [2]int64
	for {
		p.mu.Lock()
		var chunks [2][]byte
		for i := range chunks {
			chunks[i], off[i], _ = p.out[i].readFrom(off[i])
		}
		running, code, timedOut, changed := p.running, p.exitCode, p.timedOut, p.changed
		p.mu.Unlock()
		for i, c := range chunks {
			if len(c) > 0 {
				if err := nw.Write(wire.Frame{Type: streamFrameTypes[i], Data: c}, false); err != nil {
					return
				}
			}
		}
		if !running {
			_ = nw.Write(wire.Frame{Type: wire.FrameExit, ExitCode: code, TimedOut: timedOut}, true)
			return
		}
		if err := nw.Flush(); err != nil {
			return
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
}

// PostProcess serves POST /v1/processes/{id}/signal.
func (h *Handler) PostProcess(w http.ResponseWriter, r *http.Request, arg string) {
	p, action, ok := h.processArg(w, arg)
	if !ok {
		return
	}
	if action != "signal" {
		respond.Error(w, http.StatusNotFound, "not found")
		return
	}
	var req wire.SignalRequest
	if err := respond.DecodeJSON(r, &req); err != nil {
		respond.Fail(w, h.logOf(r), err)
		return
	}
	sig, err := parseSignal(req.Signal)
	if err != nil {
		respond.Fail(w, h.logOf(r), err)
		return
	}
	if p.cmd == nil {
		respond.Error(w, http.StatusConflict, "process has exited")
		return
	}
	if err := p.cmd.Signal(sig); err != nil {
		respond.Error(w, http.StatusConflict, err.Error())
		return
	}
	respond.JSON(w, http.StatusOK, p.info())
}

// DeleteProcess serves DELETE /v1/processes/{id}: kill the group if it
// still runs, wait for the exit, forget the process and return its final
// state.
func (h *Handler) DeleteProcess(w http.ResponseWriter, r *http.Request, arg string) {
	p, action, ok := h.processArg(w, arg)
	if !ok {
		return
	}
	if action != "" {
		respond.Error(w, http.StatusNotFound, "not found")
		return
	}
	if p.cmd != nil && p.isRunning() {
		go p.cmd.Terminate(h.runner.KillGrace())
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.runner.KillGrace()+10*time.Second)
	defer cancel()
	select {
	case <-p.done:
	case <-ctx.Done():
		respond.Error(w, http.StatusServiceUnavailable, "process did not exit")
		return
	}
	h.procs.mu.Lock()
	delete(h.procs.m, p.id)
	h.procs.mu.Unlock()
	respond.JSON(w, http.StatusOK, p.info())
}
