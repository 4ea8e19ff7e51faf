package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

func (a *app) lsCommand() *cobra.Command {
	var selector, output string
	var claimsOnly bool
	cmd := &cobra.Command{
		Use:     "ls [-l SELECTOR] [-o wide|json|yaml]",
		Aliases: []string{"list"},
		Short:   "List sandboxes",
		Long: `List the sandboxes of the namespace: every SandboxClaim, then every Sandbox that no
claim owns (created directly). -l filters by label, kubectl style.`,
		Example: `  sbx ls
  sbx ls -l team=a -o wide
  sbx ls -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output, "", "wide", "json", "yaml"); err != nil {
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
			switch output {
			case "json", "yaml":
				return printObjects(a.stdout, output, sbs, true)
			}
			if len(sbs) == 0 {
				fmt.Fprintf(a.stderr, "No sandboxes in namespace %s.\n", c.Namespace())
				return nil
			}
			return printTable(a.stdout, sbs, output == "wide", time.Now())
		},
	}
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "label selector, such as team=a,tier!=prod")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output: wide, json or yaml (default: a table)")
	cmd.Flags().BoolVar(&claimsOnly, "claims-only", false, "list SandboxClaims only, not Sandboxes created without a claim")
	return cmd
}

func (a *app) getCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "get NAME [-o wide|json|yaml]",
		Short: "Show one sandbox",
		Long:  `Show a sandbox by claim name (or by Sandbox name, for sandboxes created without a claim).`,
		Example: `  sbx get conv-42
  sbx get conv-42 -o yaml`,
		Args: exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, "", "wide", "json", "yaml"); err != nil {
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
			switch output {
			case "json", "yaml":
				return printObjects(a.stdout, output, []*sdk.Sandbox{sb}, false)
			}
			return printTable(a.stdout, []*sdk.Sandbox{sb}, output == "wide", time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output: wide, json or yaml (default: a table)")
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

// printTable writes a kubectl-style table.
func printTable(w io.Writer, sbs []*sdk.Sandbox, wide bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	header := "NAME\tTEMPLATE\tSANDBOX\tREADY\tREASON\tAGE"
	if wide {
		header += "\tPOD-IP\tEXPIRES\tLABELS"
	}
	fmt.Fprintln(tw, header)
	for _, sb := range sbs {
		st := sb.Status()
		template := st.Template
		if !sb.IsClaim() {
			template = "<none>"
		}
		row := []string{sb.Name(), template, orNone(st.SandboxName), readyColumn(st), orNone(st.Reason), age(st.Created, now)}
		if wide {
			expires := "<never>"
			if !st.ShutdownTime.IsZero() {
				expires = st.ShutdownTime.UTC().Format(time.RFC3339)
				if d := st.ShutdownTime.Sub(now); d > 0 {
					expires += " (in " + duration.HumanDuration(d) + ")"
				}
			}
			row = append(row, orNone(strings.Join(st.PodIPs, ",")), expires, labelsColumn(st.Labels))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

func readyColumn(st sdk.Status) string {
	switch {
	case st.Ready:
		return "True"
	case st.IdlePaused:
		return "Paused (idle)"
	case st.Paused:
		return "Paused (by you)"
	}
	return "False"
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func age(created, now time.Time) string {
	if created.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(created))
}

func labelsColumn(l map[string]string) string {
	if len(l) == 0 {
		return "<none>"
	}
	keys := slices.Sorted(maps.Keys(l))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + l[k]
	}
	return strings.Join(parts, ",")
}

// objectOf returns the API object behind a handle, with its kind set.
func objectOf(sb *sdk.Sandbox) runtime.Object {
	if cl := sb.Claim(); cl != nil {
		cl.APIVersion, cl.Kind = extv1alpha1.GroupVersion.String(), "SandboxClaim"
		cl.ManagedFields = nil
		return cl
	}
	obj := sb.Object()
	obj.APIVersion, obj.Kind = agentsv1alpha1.GroupVersion.String(), "Sandbox"
	obj.ManagedFields = nil
	return obj
}

// printObjects writes the objects as JSON or YAML: one object, or a v1 List.
func printObjects(w io.Writer, format string, sbs []*sdk.Sandbox, asList bool) error {
	var v any
	if asList || len(sbs) != 1 {
		items := make([]runtime.Object, len(sbs))
		for i, sb := range sbs {
			items[i] = objectOf(sb)
		}
		v = map[string]any{"apiVersion": "v1", "kind": "List", "items": items}
	} else {
		v = objectOf(sbs[0])
	}
	var b []byte
	var err error
	if format == "json" {
		b, err = json.MarshalIndent(v, "", "    ")
		b = append(b, '\n')
	} else {
		b, err = yaml.Marshal(v)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
