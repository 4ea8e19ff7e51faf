package testenv

import (
	"context"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(GoleakOptions()...); err != nil {
			code = 1
			println("leaked goroutines:", err.Error())
		}
	}
	os.Exit(code)
}

// A restarted etcd keeps its data and a restarted API server its address and credentials, so
// the clients made before either restart carry on.
func TestRestartKeepsStateAndCredentials(t *testing.T) {
	Require(t)
	env, err := Start(Options{Restartable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	}()
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "survivor"}, Data: map[string]string{"k": "v"}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	for _, restart := range []struct {
		name string
		do   func() error
	}{{"etcd", env.RestartEtcd}, {"kube-apiserver", env.RestartAPIServer}} {
		if err := restart.do(); err != nil {
			t.Fatalf("restarting %s: %v", restart.name, err)
		}
		got := &corev1.ConfigMap{}
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			return env.Client.Get(ctx, client.ObjectKeyFromObject(cm), got) == nil, nil
		})
		if err != nil || got.Data["k"] != "v" {
			t.Fatalf("after restarting %s the ConfigMap is %v (%v); want it back through the old client", restart.name, got.Data, err)
		}
	}
}
