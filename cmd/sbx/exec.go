package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// execFlags are the flags of sbx exec.
type execFlags struct {
	stdin, tty, shell bool
	env               []string
	cwd               string
	timeout           time.Duration
}

func (a *app) execCommand() *cobra.Command {
	var fl execFlags
	cmd := &cobra.Command{
		Use:   "exec NAME [flags] -- COMMAND [ARG...]",
		Short: "Run a command in a sandbox",
		Long: `Run a command in a sandbox and stream its output. The command's exit code becomes
sbx's exit code (124 after --timeout). The command runs as an argument vector; with
--shell (-s) its words are joined and run through /bin/sh -c. -i sends sbx's stdin
to the command; -t runs it on a terminal (interactive shells).`,
		Example: `  sbx exec conv-42 -- python3 -c 'print(1+1)'
  sbx exec conv-42 -s -- 'ls -l | wc -l'
  sbx exec conv-42 --env DEBUG=1 --cwd repo --timeout 30m -- make test
  cat data.csv | sbx exec conv-42 -i -- wc -l
  sbx exec conv-42 -it -- bash`,
		Args: execArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runExec(cmd.Context(), args[0], args[1:], fl)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&fl.stdin, "stdin", "i", false, "pass stdin to the command")
	f.BoolVarP(&fl.tty, "tty", "t", false, "run the command on a terminal")
	f.BoolVarP(&fl.shell, "shell", "s", false, "run the command words through /bin/sh -c")
	a.serverFlagWithoutShorthand(f)
	f.StringArrayVarP(&fl.env, "env", "e", nil, "environment variable K=V for the command (repeatable)")
	f.StringVar(&fl.cwd, "cwd", "", "working directory (relative to the sandbox root, /workspace)")
	f.DurationVar(&fl.timeout, "timeout", 0, "kill the command after this long (default: sandboxd's, 5m)")
	return cmd
}

// execArgs wants one sandbox name, then the command after --.
func execArgs(cmd *cobra.Command, args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("exec needs a sandbox name and a command: sbx exec NAME -- COMMAND [ARG...]")
	}
	if at := cmd.ArgsLenAtDash(); at > 1 {
		return fmt.Errorf("exec takes one sandbox name before --, got %q", args[:at])
	}
	return nil
}

// runExec runs the command words in the named sandbox; the command's exit code becomes sbx's.
func (a *app) runExec(ctx context.Context, name string, words []string, fl execFlags) error {
	command := sdk.Argv(words...)
	if fl.shell {
		command = sdk.Shell(strings.Join(words, " "))
	}
	opts, err := a.execRunOptions(fl)
	if err != nil {
		return err
	}
	if fl.tty {
		t, restore, err := a.setupTTY(ctx, fl.stdin)
		if err != nil {
			return err
		}
		defer restore()
		opts = append(opts, sdk.WithTTY(t))
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()
	sb, err := c.Get(ctx, name)
	if err != nil {
		return err
	}
	defer sb.Close()
	res, err := sb.Run(ctx, command, opts...)
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return &exitError{code: 130} // interrupted, like a shell
		}
		return err
	}
	if res.TimedOut {
		fmt.Fprintf(a.streams.ErrOut, "sbx: command timed out after %s\n", fl.timeout)
	}
	if res.ExitCode != 0 {
		return &exitError{code: res.ExitCode}
	}
	return nil
}

// execRunOptions turns the flags (all but --tty's terminal) into run options.
func (a *app) execRunOptions(fl execFlags) ([]sdk.RunOption, error) {
	envMap, err := parsePairs(fl.env, "--env")
	if err != nil {
		return nil, err
	}
	opts := []sdk.RunOption{sdk.WithStdout(a.streams.Out)}
	if !fl.tty {
		opts = append(opts, sdk.WithStderr(a.streams.ErrOut))
	}
	if len(envMap) > 0 {
		opts = append(opts, sdk.WithEnv(envMap))
	}
	if fl.cwd != "" {
		opts = append(opts, sdk.WithCwd(fl.cwd))
	}
	if fl.timeout > 0 {
		opts = append(opts, sdk.WithTimeout(fl.timeout))
	}
	if fl.stdin {
		opts = append(opts, sdk.WithStdin(a.streams.In))
	}
	return opts, nil
}

// setupTTY puts a terminal stdin in raw mode and follows its size.
func (a *app) setupTTY(ctx context.Context, withStdin bool) (sdk.TTY, func(), error) {
	t := sdk.TTY{Cols: 80, Rows: 24}
	f, ok := a.streams.In.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		if withStdin {
			fmt.Fprintln(a.streams.ErrOut, "sbx: stdin is not a terminal; running with a remote terminal anyway")
		}
		return t, func() {}, nil
	}
	fd := int(f.Fd())
	if w, h, err := term.GetSize(fd); err == nil && w > 0 && h > 0 {
		t.Cols, t.Rows = uint16(w), uint16(h)
	}
	if !withStdin {
		return t, func() {}, nil
	}
	old, err := term.MakeRaw(fd)
	if err != nil {
		return t, nil, fmt.Errorf("setting the terminal to raw mode: %w", err)
	}
	resize, stopResize := watchResize(ctx, fd)
	t.Resize = resize
	return t, func() {
		stopResize()
		_ = term.Restore(fd, old)
	}, nil
}
