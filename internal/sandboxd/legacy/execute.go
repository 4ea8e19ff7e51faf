package legacy

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// The python runtime ran `shlex.split(command)` without a shell and answered
// every failure to run it (empty command, program not found, timeout) with
// HTTP 200, exit_code 1 and "Failed to execute command: <reason>" on stderr.
// Clients test exit_code, so POST /execute answers those cases the same way.

// failurePrefix starts the stderr of every failure to run a command.
const failurePrefix = "Failed to execute command: "

// writeFailure answers a command that could not run, as the python
// runtime did.
func writeFailure(w http.ResponseWriter, stdout, reason string) {
	respond.JSON(w, http.StatusOK, wire.LegacyExecuteResponse{Stdout: stdout, Stderr: failurePrefix + reason, ExitCode: 1})
}

// shellWords are the first words that the shell runs itself: no program of
// that name needs to exist.
var shellWords = map[string]bool{
	".": true, ":": true, "[": true, "alias": true, "bg": true, "break": true, "case": true, "cd": true,
	"command": true, "continue": true, "echo": true, "eval": true, "exec": true, "exit": true,
	"export": true, "false": true, "fg": true, "for": true, "getopts": true, "hash": true, "if": true,
	"jobs": true, "kill": true, "printf": true, "pwd": true, "read": true, "readonly": true,
	"return": true, "set": true, "shift": true, "test": true, "times": true, "trap": true, "true": true,
	"type": true, "ulimit": true, "umask": true, "unalias": true, "unset": true, "until": true,
	"wait": true, "while": true, "{": true, "!": true, "local": true, "time": true,
}

// missingProgram reports the program a command starts with when it
// does not exist, so the answer can be the python runtime's FileNotFoundError
// rather than the shell's exit code 127. Only a plain first word is checked;
// anything the shell would expand, or a builtin, is left to the shell.
func missingProgram(command string, sp *process.Spec) (string, bool) {
	fields := strings.Fields(command)
	if len(fields) == 0 {
		return "", false
	}
	name := fields[0]
	if shellWords[name] || strings.ContainsAny(name, "$`\"'\\|&;<>(){}*?[]~=#") {
		return "", false
	}
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(sp.Dir, p)
		}
		_, err := os.Stat(p)
		return name, errors.Is(err, fs.ErrNotExist)
	}
	return name, sp.LookPath(name) == ""
}

// result turns a finished command into the python runtime's answer: a
// timeout is exit code 1 with a message (python discarded the output; we keep
// what was produced, see docs/sandboxd-api.md), a signal is -N as
// subprocess reports it, and output over the cap is never cut silently: the
// answer carries exit code 1 (unless the command already failed) and a
// stderr line saying which stream was cut where.
func (h *Handler) result(out wire.ExecResult, res process.Result, command string, timeout string) wire.LegacyExecuteResponse {
	r := wire.LegacyExecuteResponse{Stdout: out.Stdout, Stderr: out.Stderr, ExitCode: out.ExitCode}
	switch {
	case res.TimedOut:
		r.Stderr = process.AppendLine(r.Stderr, fmt.Sprintf("%sCommand %q timed out after %s seconds", failurePrefix, command, timeout))
		r.ExitCode = 1
	case res.Signal != 0:
		r.ExitCode = -res.Signal
	}
	r.Stderr, r.ExitCode = h.runner.NoteTruncation(out, r.Stderr, r.ExitCode)
	return r
}

// Execute serves POST /execute. Unlike the python runtime, the
// command goes through /bin/sh -c, so pipes and redirections work; clients
// that wrapped commands in `sh -c '...'` themselves are unaffected. Failures
// the python runtime reported as exit code 1 with "Failed to execute
// command: ..." on stderr (empty command, program not found, timeout) are
// answered the same way; see docs/sandboxd-api.md.
func (h *Handler) Execute(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Command *string `json:"command"`
	}
	if err := respond.DecodeJSON(r, &req); err != nil {
		writeValidation(w, []string{"body"}, err.Error())
		return
	}
	if req.Command == nil {
		writeValidation(w, []string{"body", "command"}, "Field required")
		return
	}
	if strings.TrimSpace(*req.Command) == "" {
		writeFailure(w, "", "empty command")
		return
	}
	sp, err := h.runner.BuildSpec(r.Context(), &wire.ExecRequest{Command: *req.Command}, h.execTimeout)
	if err != nil {
		_, msg := respond.Status(err)
		writeFailure(w, "", msg)
		return
	}
	if name, ok := missingProgram(*req.Command, sp); ok {
		writeFailure(w, "", fmt.Sprintf("[Errno 2] No such file or directory: '%s'", name))
		return
	}
	out, res := h.runner.Collect(r.Context(), sp, "legacy")
	secs := strconv.FormatFloat(h.execTimeout.Seconds(), 'f', -1, 64)
	respond.JSON(w, http.StatusOK, h.result(out, res, *req.Command, secs))
}
