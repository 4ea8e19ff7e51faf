package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent"
	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent/imagestore"
	"github.com/agent-sandbox/agent-sandbox/internal/router/access"
)

var sandboxes = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}

func run(ctx context.Context, o serveOptions, log *slog.Logger) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return err
	}
	kcs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.imagesDir, 0o700); err != nil {
		return err
	}
	agent := &nodeagent.Agent{Node: o.node, Images: imagestore.Store{Dir: o.imagesDir}, Tasks: o.tasksDir, ShimRoot: o.shimRoot, Log: log}
	reviewer := &access.KubeTokenReviewer{Client: kcs.AuthenticationV1().TokenReviews(), Audiences: []string{nodeagent.Audience}}
	srv := &http.Server{
		Addr:              net.JoinHostPort(o.listen, strconv.Itoa(o.port)),
		Handler:           nodeagent.Handler(agent, reviewer, o.allowed),
		ReadHeaderTimeout: 10 * time.Second,
	}
	exists := func(ctx context.Context, ns, name, uid string) (bool, error) {
		m, err := meta.Resource(sandboxes).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && string(m.UID) == uid, err
	}
	go func() {
		tick := time.NewTicker(o.sweepEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				agent.Sweep(ctx, exists)
			}
		}
	}()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Info("node agent serving", "address", srv.Addr, "node", o.node, "images", o.imagesDir)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
