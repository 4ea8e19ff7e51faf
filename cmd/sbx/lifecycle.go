package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

func (a *app) pauseCommand() *cobra.Command {
	var keepMemory bool
	cmd := &cobra.Command{
		Use:   "pause NAME...",
		Short: "Pause sandboxes: delete their pods, keep their volumes",
		Long: `Pause scales each sandbox's Sandbox to zero replicas: the pod is deleted, the volumes
and the Service stay. sbx resume brings a new pod up on the same volumes.
--keep-memory (gVisor, with the node agent installed) saves the processes' memory first and
restores it at the resume (the Sandbox's annotation agents.x-k8s.io/pause-mode: KeepMemory;
its MemoryKept condition says what became of it).`,
		Args: atLeastOneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			var opts []sdk.PauseOption
			if keepMemory {
				opts = append(opts, sdk.KeepMemory)
			}
			return a.eachName(args, func(c *sdk.Client, name string) error {
				if err := c.Pause(cmd.Context(), name, opts...); err != nil {
					return err
				}
				fmt.Fprintf(a.streams.Out, "sandbox %s paused\n", name)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&keepMemory, "keep-memory", false, "Keep the processes' memory across the pause (gVisor; agents.x-k8s.io/pause-mode: KeepMemory)")
	return cmd
}

func (a *app) resumeCommand() *cobra.Command {
	var timeout time.Duration
	var onResume []string
	var showProgress bool
	cmd := &cobra.Command{
		Use:   "resume NAME...",
		Short: "Resume paused sandboxes and wait until they are ready",
		Long: `Resume scales each sandbox back to one replica and waits until its new pod is ready,
showing the wait's progress on stderr on a terminal (or with --progress).
--on-resume commands then run in it (sh -c), in order, before sbx resume reports it; if
one fails, sbx resume fails with its output and leaves the sandbox running.`,
		Example: `  sbx resume ws-alice --on-resume 'mount-workspace && start-dev-server'`,
		Args:    atLeastOneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.eachName(args, func(c *sdk.Client, name string) error {
				opts := []sdk.WaitOption{}
				if timeout > 0 {
					opts = append(opts, sdk.WithReadyTimeout(timeout))
				}
				for _, h := range onResume {
					opts = append(opts, sdk.OnResume(sdk.Shell(h)))
				}
				progress, stop := a.startProgress(cmd, showProgress, false)
				if progress != nil {
					opts = append(opts, progress)
				}
				sb, err := c.Resume(cmd.Context(), name, opts...)
				stop()
				if err != nil {
					return err
				}
				fmt.Fprintf(a.streams.Out, "sandbox %s resumed (pod IP %s)\n", name, strings.Join(sb.PodIPs(), ","))
				return nil
			})
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "how long to wait for each sandbox to be ready (default 2m)")
	addProgressFlag(cmd.Flags(), &showProgress)
	cmd.Flags().StringArrayVar(&onResume, "on-resume", nil, "shell command run in each sandbox once it is ready again, before reporting it (repeatable, in order)")
	return cmd
}

func (a *app) rmCommand() *cobra.Command {
	var opt sdk.DeleteOption
	var ignoreMissing bool
	cmd := &cobra.Command{
		Use:     "rm NAME...",
		Aliases: []string{"delete"},
		Short:   "Delete sandboxes (the claim, its Sandbox, pod, Service and volumes)",
		Args:    atLeastOneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.eachName(args, func(c *sdk.Client, name string) error {
				err := c.Delete(cmd.Context(), name, opt)
				if err != nil && !(ignoreMissing && errors.Is(err, sdk.ErrNotFound)) {
					return err
				}
				fmt.Fprintf(a.streams.Out, "sandbox %s deleted\n", name)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&opt.Wait, "wait", false, "wait until the objects are gone")
	cmd.Flags().BoolVar(&opt.Foreground, "foreground", false, "foreground deletion: the claim stays until its Sandbox and pod are gone")
	cmd.Flags().BoolVar(&ignoreMissing, "ignore-not-found", false, "do not fail on sandboxes that do not exist")
	return cmd
}

func (a *app) keepaliveCommand() *cobra.Command {
	var d time.Duration
	cmd := &cobra.Command{
		Use:   "keepalive NAME... --for DURATION",
		Short: "Move a sandbox's shutdown time to now + DURATION",
		Long: `Keepalive sets the claim's spec.lifecycle.shutdownTime (a Sandbox's spec.shutdownTime)
to now + --for, so that a TTL only removes sandboxes nobody uses.`,
		Example: `  sbx keepalive conv-42 --for 1h`,
		Args:    atLeastOneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			if d <= 0 {
				return fmt.Errorf("--for must be a positive duration, such as 30m or 1h")
			}
			at := time.Now().Add(d)
			return a.eachName(args, func(c *sdk.Client, name string) error {
				if err := c.SetShutdownTime(cmd.Context(), name, at); err != nil {
					return err
				}
				fmt.Fprintf(a.streams.Out, "sandbox %s now expires at %s\n", name, at.Add(time.Second-1).Truncate(time.Second).UTC().Format(time.RFC3339))
				return nil
			})
		},
	}
	cmd.Flags().DurationVar(&d, "for", 0, "how long the sandbox should live from now (required)")
	return cmd
}

func (a *app) checkCommand() *cobra.Command {
	var templates []string
	cmd := &cobra.Command{
		Use:   "check [--template T]...",
		Short: "Check that agent-sandbox is installed and reachable",
		Long: `Check verifies that the four CRDs are served (sandboxes, sandboxclaims, sandboxtemplates,
sandboxwarmpools), that the router answers /healthz when --router is given, and that
the --template templates exist. It says how to fix whatever is missing. A missing CRD or
template fails (exit 1); a router that does not answer is a warning on stderr (exit 0).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			defer c.Close()
			var opts []sdk.CheckOption
			for _, t := range templates {
				opts = append(opts, sdk.RequireTemplate(t))
			}
			err = c.CheckCluster(cmd.Context(), opts...)
			if sdk.IsFatal(err) {
				return err
			}
			if err != nil {
				// Only the router is down: sandboxes still work without it (a warning, as the Python agent server's startup check has it).
				fmt.Fprintf(a.streams.ErrOut, "warning: %v\n", err)
			}
			fmt.Fprintf(a.streams.Out, "ok: CRDs installed")
			if a.g.router != "" && err == nil {
				fmt.Fprintf(a.streams.Out, ", router %s healthy", a.g.router)
			}
			if len(templates) > 0 {
				fmt.Fprintf(a.streams.Out, ", templates %s present in %s", strings.Join(templates, ", "), c.Namespace())
			}
			fmt.Fprintf(a.streams.Out, " (mode %s)\n", c.Mode())
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&templates, "template", nil, "also require this SandboxTemplate (repeatable)")
	return cmd
}

// eachName runs fn for every sandbox named on the command line with one client, going on past
// failures and returning them all.
func (a *app) eachName(names []string, fn func(c *sdk.Client, name string) error) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()
	var errs []error
	for _, name := range names {
		if err := fn(c, name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
