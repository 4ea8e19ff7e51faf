package hostpathprov

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// Options are what Run needs besides the client.
type Options struct {
	// Root holds the volumes' directories (DefaultRoot when empty).
	Root string
	// Health, when not nil, serves GET /healthz: 200 "ok" once the controller runs.
	Health net.Listener
}

// Run provisions and deletes the volumes of StorageClasses whose provisioner is Name until ctx
// ends, then waits for its workers. Leader election is off: one process serves the cluster.
// The library's constructor registers the core kinds in client-go's global scheme (a write
// racing with any goroutine decoding with it), so Run belongs in a process of its own: the
// `devcluster hostpath-provisioner` subcommand.
func Run(ctx context.Context, cs kubernetes.Interface, opts Options) error {
	if opts.Root == "" {
		opts.Root = DefaultRoot
	}
	var workers sync.WaitGroup
	pc := controller.NewProvisionController(ctx, cs, Name, &Provisioner{Root: opts.Root}, controller.LeaderElection(false))
	pc.ControllerWaitGroup(&workers)
	serveErr := make(chan error, 1)
	var srv *http.Server
	if opts.Health != nil {
		srv = healthServer(pc)
		go func() { serveErr <- srv.Serve(opts.Health) }()
	}
	pc.Run(ctx)
	workers.Wait()
	if srv == nil {
		return nil
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-serveErr; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

func healthServer(pc *controller.ProvisionController) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !pc.HasRun() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
}
