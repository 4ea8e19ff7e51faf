package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// outputFlags is -o: kubectl's printers (json, yaml, name, go-template, jsonpath, ...), which
// print the API objects as kubectl does, and the formats the command prints itself for people
// (its default, and "wide" for ls and get).
type outputFlags struct {
	print *genericclioptions.PrintFlags
	own   []string
}

func newOutputFlags(own ...string) *outputFlags {
	return &outputFlags{print: genericclioptions.NewPrintFlags("").WithTypeSetter(sdk.Scheme()), own: own}
}

// addFlags adds -o and the printers' flags to cmd; withTemplate false leaves out the printers'
// --template, for a command whose --template is its own (create), where -o
// go-template=TEMPLATE still works.
func (o *outputFlags) addFlags(cmd *cobra.Command, withTemplate bool, defaultText string) {
	o.print.JSONYamlPrintFlags.AddFlags(cmd)
	if withTemplate {
		o.print.TemplatePrinterFlags.AddFlags(cmd)
	}
	cmd.Flags().StringVarP(o.print.OutputFormat, "output", "o", "",
		fmt.Sprintf("Output format. One of: (%s). Default: %s.", strings.Join(o.formats(), ", "), defaultText))
	o.print.OutputFlagSpecified = func() bool { return cmd.Flag("output").Changed }
}

func (o *outputFlags) formats() []string {
	return append(slices.Clone(o.own), o.print.AllowedFormats()...)
}

// format is the -o value ("" when not given).
func (o *outputFlags) format() string { return *o.print.OutputFormat }

// given reports whether -o was given (with any value).
func (o *outputFlags) given() bool { return o.format() != "" }

// printer returns the printer for -o, or nil when the command prints the format itself. It
// checks -o, so commands call it before they change anything.
func (o *outputFlags) printer() (printers.ResourcePrinter, error) {
	if f := o.format(); f == "" || slices.Contains(o.own, f) {
		return nil, nil
	}
	p, err := o.print.ToPrinter()
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		return nil, fmt.Errorf("--output %q: want one of %s", o.format(), strings.Join(o.formats(), ", "))
	}
	return p, err
}

// printObjects prints the sandboxes' API objects: one object alone, else (or asList) a v1
// List, as kubectl get does (an unstructured List, the one kind of list every printer takes).
func printObjects(p printers.ResourcePrinter, w io.Writer, sbs []*sdk.Sandbox, asList bool) error {
	if len(sbs) == 1 && !asList {
		return p.PrintObj(objectOf(sbs[0]), w)
	}
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{}}}
	for _, sb := range sbs {
		item, err := runtime.DefaultUnstructuredConverter.ToUnstructured(objectOf(sb))
		if err != nil {
			return err
		}
		list.Items = append(list.Items, unstructured.Unstructured{Object: item})
	}
	return p.PrintObj(list, w)
}

// objectOf returns the API object behind a handle, with its kind set (a List's items need it
// in the object).
func objectOf(sb *sdk.Sandbox) runtime.Object {
	if cl := sb.Claim(); cl != nil {
		cl.APIVersion, cl.Kind = extv1alpha1.GroupVersion.String(), "SandboxClaim"
		return cl
	}
	obj := sb.Object()
	obj.APIVersion, obj.Kind = agentsv1alpha1.GroupVersion.String(), "Sandbox"
	return obj
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
