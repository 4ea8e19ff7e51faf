// Package kube holds the local cluster's API helpers: clients from a kubeconfig, server-side
// apply of manifests read from YAML, and readiness checks of CRDs, nodes and Deployments.
package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

const fieldOwner = client.FieldOwner("agent-sandbox-dev")

// Client is a controller-runtime client of the cluster from a kubeconfig.
func Client(kubeconfig string) (client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{})
}

// ApplyAll applies objects server-side, taking ownership of their fields.
func ApplyAll(ctx context.Context, cl client.Client, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		o.SetManagedFields(nil)
		o.SetResourceVersion("")
		if err := cl.Patch(ctx, o, client.Apply, fieldOwner, client.ForceOwnership); err != nil { //nolint:staticcheck // unstructured apply
			return fmt.Errorf("applying %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// CRDEstablished is true when the CRD is Established.
func CRDEstablished(cl client.Client, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
		if err := cl.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, cond := range conds {
			m, _ := cond.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return nil
			}
		}
		return errors.New("not established yet")
	}
}

// ReadYAMLDir decodes every *.yaml of a directory but its kustomization.yaml, in name order.
func ReadYAMLDir(dir string) ([]*unstructured.Unstructured, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	paths = slices.DeleteFunc(paths, func(p string) bool { return filepath.Base(p) == "kustomization.yaml" })
	if len(paths) == 0 {
		return nil, fmt.Errorf("no manifests in %s", dir)
	}
	sort.Strings(paths)
	var out []*unstructured.Unstructured
	for _, p := range paths {
		objs, err := ReadYAMLFile(p)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// ReadYAMLFile decodes every object of a YAML file.
func ReadYAMLFile(p string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	objs, err := DecodeYAML(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return objs, nil
}

// DecodeYAML decodes a stream of YAML or JSON objects.
func DecodeYAML(r io.Reader) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// Clientset is a client-go clientset of the cluster from a kubeconfig.
func Clientset(kubeconfig string) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 50, 100
	return kubernetes.NewForConfig(cfg)
}

// NodeReady is true when the node reports Ready.
func NodeReady(kubeconfig, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		cs, err := Clientset(kubeconfig)
		if err != nil {
			return err
		}
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("node %s not ready: %s %s", name, cond.Reason, cond.Message)
			}
		}
		return fmt.Errorf("node %s has no Ready condition yet", name)
	}
}

// DeploymentRolledOut is true when every replica runs the newest pod template and is ready.
func DeploymentRolledOut(cl client.Client, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		var d appsv1.Deployment
		if err := cl.Get(ctx, client.ObjectKey{Namespace: spec.SystemNS, Name: name}, &d); err != nil {
			return err
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		st := d.Status
		if st.ObservedGeneration < d.Generation || st.UpdatedReplicas < want || st.AvailableReplicas < want || st.Replicas > want {
			return fmt.Errorf("%d/%d updated, %d available, %d total", st.UpdatedReplicas, want, st.AvailableReplicas, st.Replicas)
		}
		return nil
	}
}

// DaemonSetRolledOut is true when every node it is scheduled on runs its newest pod template, ready.
func DaemonSetRolledOut(cl client.Client, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		var d appsv1.DaemonSet
		if err := cl.Get(ctx, client.ObjectKey{Namespace: spec.SystemNS, Name: name}, &d); err != nil {
			return err
		}
		st := d.Status
		if st.ObservedGeneration < d.Generation || st.DesiredNumberScheduled == 0 ||
			st.UpdatedNumberScheduled < st.DesiredNumberScheduled || st.NumberReady < st.DesiredNumberScheduled {
			return fmt.Errorf("%d/%d updated, %d ready", st.UpdatedNumberScheduled, st.DesiredNumberScheduled, st.NumberReady)
		}
		return nil
	}
}
