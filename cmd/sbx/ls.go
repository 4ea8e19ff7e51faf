package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

func (a *app) lsCommand() *cobra.Command {
	var selector string
	var claimsOnly bool
	out := newOutputFlags("wide")
	cmd := &cobra.Command{
		Use:     "ls [-l SELECTOR] [-o wide|json|yaml|name|...]",
		Aliases: []string{"list"},
		Short:   "List sandboxes",
		Long: `List the sandboxes of the namespace: every SandboxClaim, then every Sandbox that no
claim owns (created directly). -l filters by label, kubectl style. -o json, yaml, name,
jsonpath=... and go-template=... print the objects as kubectl get does (a List).`,
		Example: `  sbx ls
  sbx ls -l team=a -o wide
  sbx ls -o yaml
  sbx ls -o jsonpath='{.items[*].metadata.name}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := out.printer()
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			defer c.Close()
			sbs, err := c.List(cmd.Context(), selector)
			if err != nil {
				return err
			}
			if !claimsOnly {
				raw, err := c.ListSandboxes(cmd.Context(), selector)
				if err != nil {
					return err
				}
				sbs = append(sbs, raw...)
			}
			if p != nil {
				return printObjects(p, a.streams.Out, sbs, true)
			}
			if len(sbs) == 0 {
				fmt.Fprintf(a.streams.ErrOut, "No sandboxes in namespace %s.\n", c.Namespace())
				return nil
			}
			return printTable(a.streams.Out, sbs, out.format() == "wide", time.Now())
		},
	}
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "label selector, such as team=a,tier!=prod")
	cmd.Flags().BoolVar(&claimsOnly, "claims-only", false, "list SandboxClaims only, not Sandboxes created without a claim")
	out.addFlags(cmd, true, "a table")
	return cmd
}

func (a *app) getCommand() *cobra.Command {
	out := newOutputFlags("wide")
	cmd := &cobra.Command{
		Use:   "get NAME [-o wide|json|yaml|name|...]",
		Short: "Show one sandbox",
		Long: `Show a sandbox by claim name (or by Sandbox name, for sandboxes created without a claim),
and what it may reach: EGRESS is a raw Sandbox's egress mode with its CIDRs and domains, or a
claim's template's domain list, then the controller's EgressPolicy condition when it has one.
-o json, yaml, name, jsonpath=... and go-template=... print the object as kubectl get does.`,
		Example: `  sbx get conv-42
  sbx get conv-42 -o yaml`,
		Args: exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := out.printer()
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			defer c.Close()
			sb, err := c.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if p != nil {
				return printObjects(p, a.streams.Out, []*sdk.Sandbox{sb}, false)
			}
			if err := printTable(a.streams.Out, []*sdk.Sandbox{sb}, out.format() == "wide", time.Now()); err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.streams.Out, "EGRESS: %s\n", effectiveEgress(cmd.Context(), c, sb))
			return err
		},
	}
	out.addFlags(cmd, true, "a table")
	return cmd
}

func exactlyOneName(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%s needs exactly one sandbox name (got %d); see --help", cmd.CommandPath(), len(args))
	}
	return nil
}

func atLeastOneName(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%s needs at least one sandbox name; see --help", cmd.CommandPath())
	}
	return nil
}
