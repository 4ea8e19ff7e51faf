package devcluster

import (
	"flag"
	"fmt"
	"net"

	"github.com/spf13/cobra"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/hostpathprov"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/kube"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
	"github.com/agent-sandbox/agent-sandbox/internal/logging"
	"github.com/agent-sandbox/agent-sandbox/internal/logging/kubelog"
)

// NewCommand returns `dev` with its subcommands up, down, status, images and
// hostpath-provisioner, to mount under a CLI (`go run ./cmd/devcluster ...`).
func NewCommand() *cobra.Command {
	var cfg spec.Config
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local single-node Kubernetes cluster with agent-sandbox installed",
		Long: `Runs etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd and a real
kubelet on this machine (no Docker), plus the agent-sandbox controller and router, with state in
one directory. Needs root. The first run builds Kubernetes from the Go module proxy (minutes).`,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) { QuietLibraryLogs(cmd.ErrOrStderr()) },
	}
	cmd.PersistentFlags().StringVar(&cfg.Dir, "dir", spec.DefaultDir(), "State directory of the cluster.")

	cmd.AddCommand(upCommand(&cfg), downCommand(&cfg), statusCommand(&cfg), imagesCommand(&cfg), hostPathProvisionerCommand())
	return cmd
}

// upCommand starts the cluster (or completes a running one) and prints its kubeconfig.
func upCommand(cfg *spec.Config) *cobra.Command {
	up := &cobra.Command{
		Use:   "up",
		Short: "Start the cluster, or complete and reuse a running one",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Out = cmd.ErrOrStderr()
			cl, err := Up(cmd.Context(), *cfg)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), cl.Kubeconfig)
			return nil
		},
	}
	up.Flags().IntVar(&cfg.KwokNodes, "kwok-nodes", 0, "Simulated (kwok) nodes to register, tainted so only tolerating pods land there.")
	up.Flags().StringVar(&cfg.RepoRoot, "source", "", "agent-sandbox source tree to build from (default: found from the working directory).")
	up.Flags().BoolVar(&cfg.HostProcesses, "host-processes", false, "Run the controller and router as processes on this machine (fast iteration) instead of the Helm chart's Deployments.")
	up.Flags().StringVar(&cfg.SandboxRuntime, "sandbox-runtime", "", "Runtime of the sandboxes' pods: gvisor (RuntimeClass gvisor) or runc (default: $SANDBOX_RUNTIME, else gvisor).")
	return up
}

// downCommand stops the cluster and undoes its host changes.
func downCommand(cfg *spec.Config) *cobra.Command {
	var purge bool
	down := &cobra.Command{
		Use:   "down",
		Short: "Stop every process of the cluster and undo its host changes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Out = cmd.ErrOrStderr()
			return Down(cmd.Context(), *cfg, purge)
		},
	}
	down.Flags().BoolVar(&purge, "purge", false, "Also remove the state directory (certificates, logs, binaries).")
	return down
}

// statusCommand reports each component.
func statusCommand(cfg *spec.Config) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Report each component of the cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Out = cmd.ErrOrStderr()
			sts, err := Status(cmd.Context(), *cfg)
			if err != nil {
				return err
			}
			PrintStatus(cmd.OutOrStdout(), sts, *cfg)
			return nil
		},
	}
}

// imagesCommand writes our images as docker-archive tars for other clusters.
func imagesCommand(cfg *spec.Config) *cobra.Command {
	var imagesDir string
	imagesCmd := &cobra.Command{
		Use:   "images",
		Short: "Build the runtime, controller and router images as docker-archive tars, for other clusters",
		Long: `Builds our binaries from the source tree and writes agent-sandbox/{runtime,controller,router}:dev
as docker-archive tars (no container engine needed). Load them with docker/podman load, kind load
image-archive or ctr images import, or push them with skopeo copy docker-archive:<tar> docker://<ref>.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Out = cmd.ErrOrStderr()
			paths, err := WriteImages(cmd.Context(), *cfg, imagesDir)
			if err != nil {
				return err
			}
			for _, p := range paths {
				fmt.Fprintln(cmd.OutOrStdout(), p)
			}
			return nil
		},
	}
	imagesCmd.Flags().StringVar(&imagesDir, "out", "", "Folder for the archives (default: bin/images of the source tree).")
	imagesCmd.Flags().StringVar(&cfg.RepoRoot, "source", "", "agent-sandbox source tree to build from (default: found from the working directory).")
	return imagesCmd
}

// hostPathProvisionerCommand runs the cluster's PV provisioner; `up` starts it as a host
// process.
func hostPathProvisionerCommand() *cobra.Command {
	var kubeconfig, root, healthAddr string
	logOpts := logging.NewOptions(logging.FormatText)
	cmd := &cobra.Command{
		Use:   "hostpath-provisioner",
		Short: "Provision the cluster's PersistentVolumes as world-writable directories (" + hostpathprov.Name + ")",
		Long: `Serves the StorageClasses whose provisioner is ` + hostpathprov.Name + `: each claim gets a
directory <root>/<pv name> with mode 0777 (writable by a sandbox whatever its uid), removed with
its PersistentVolume. Runs until SIGTERM; dev up starts it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := kubelog.Setup(logOpts, cmd.ErrOrStderr())
			cs, err := kube.Clientset(kubeconfig)
			if err != nil {
				return err
			}
			opts := hostpathprov.Options{Root: root}
			if healthAddr != "" {
				if opts.Health, err = net.Listen("tcp", healthAddr); err != nil {
					return err
				}
			}
			log.Info("serving", "provisioner", hostpathprov.Name, "root", root, "health", healthAddr)
			return hostpathprov.Run(logging.IntoContext(cmd.Context(), log), cs, opts)
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "Kubeconfig of the cluster (required).")
	cmd.Flags().StringVar(&root, "root", hostpathprov.DefaultRoot, "Directory holding the volumes.")
	cmd.Flags().StringVar(&healthAddr, "health-addr", "", "Address to serve GET /healthz on (none when empty).")
	_ = cmd.MarkFlagRequired("kubeconfig")
	gofs := flag.NewFlagSet("logging", flag.ContinueOnError)
	logOpts.BindFlags(gofs)
	cmd.Flags().AddGoFlagSet(gofs)
	return cmd
}
