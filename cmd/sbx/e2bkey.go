package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// E2B API keys are ServiceAccount tokens (docs/e2b.md): the key's namespace is its
// ServiceAccount's, and RBAC decides what it may do. The key is stored as Kubernetes stores
// long-lived tokens, a Secret of type service-account-token, so deleting the Secret revokes it.
const (
	e2bKeyRole      = "agent-sandbox-e2b-key"
	e2bKeyPrefix    = "e2b_"
	e2bKeySecretFmt = "%s-e2b-key"
)

func (a *app) e2bKeyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "e2b-key",
		Short: "Make and revoke E2B API keys (ServiceAccount tokens) for the router's E2B port",
	}
	cmd.AddCommand(a.e2bKeyCreateCommand(), a.e2bKeyRevokeCommand())
	return cmd
}

func (a *app) e2bKeyCreateCommand() *cobra.Command {
	var bind bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Make an E2B API key for ServiceAccount NAME of the namespace and print it",
		Long: `create makes ServiceAccount NAME (unless it exists), binds it to the ClusterRole
` + e2bKeyRole + ` in the namespace (the rights an E2B program needs: claims and their
Sandboxes; --bind=false leaves RBAC to you), and stores a token for it in the Secret
NAME-e2b-key. It prints the key, e2b_<token>, alone on stdout. Delete the Secret (sbx
e2b-key revoke NAME) to revoke it.`,
		Example: `  export E2B_API_KEY=$(sbx -n team-a e2b-key create agent)`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cs, ns, err := a.kubeClientset()
			if err != nil {
				return err
			}
			token, err := createE2BKey(cmd.Context(), cs, ns, args[0], bind, timeout)
			if err != nil {
				return err
			}
			fmt.Fprintln(a.streams.Out, e2bKeyPrefix+token)
			return nil
		},
	}
	cmd.Flags().BoolVar(&bind, "bind", true, "bind the ServiceAccount to the ClusterRole "+e2bKeyRole+" in the namespace")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for Kubernetes to write the token into the Secret")
	return cmd
}

func (a *app) e2bKeyRevokeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke the E2B API key of ServiceAccount NAME (delete its Secret)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cs, ns, err := a.kubeClientset()
			if err != nil {
				return err
			}
			name := fmt.Sprintf(e2bKeySecretFmt, args[0])
			if err := cs.CoreV1().Secrets(ns).Delete(cmd.Context(), name, metav1.DeleteOptions{}); err != nil {
				return err
			}
			fmt.Fprintf(a.streams.Out, "E2B key %s revoked (Secret %s deleted)\n", args[0], name)
			return nil
		},
	}
}

// kubeClientset is a client-go clientset and the namespace from kubectl's flags.
func (a *app) kubeClientset() (*kubernetes.Clientset, string, error) {
	cfg, err := a.kube.ToRESTConfig()
	if err != nil {
		return nil, "", err
	}
	ns, _, err := a.kube.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	return cs, ns, err
}

// createE2BKey makes the ServiceAccount (kept when it exists), its binding and the token
// Secret, and waits for the token. An existing key Secret is refused rather than reused: its
// token may have been handed out already.
func createE2BKey(ctx context.Context, cs kubernetes.Interface, ns, sa string, bind bool, timeout time.Duration) (string, error) {
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating ServiceAccount %s: %w", sa, err)
	}
	if bind {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: sa + "-e2b-key"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: e2bKeyRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
		}
		if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("binding %s to %s: %w", sa, e2bKeyRole, err)
		}
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf(e2bKeySecretFmt, sa), Annotations: map[string]string{corev1.ServiceAccountNameKey: sa}},
		Type:       corev1.SecretTypeServiceAccountToken,
	}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("secret %s exists: revoke that key first (sbx e2b-key revoke %s) or read it with kubectl", secret.Name, sa)
		}
		return "", fmt.Errorf("creating Secret %s: %w", secret.Name, err)
	}
	return waitForToken(ctx, cs, ns, secret.Name, timeout)
}

func waitForToken(ctx context.Context, cs kubernetes.Interface, ns, name string, timeout time.Duration) (string, error) {
	var token string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		s, err := cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		token = string(s.Data[corev1.ServiceAccountTokenKey])
		return token != "", nil
	})
	if errors.Is(err, context.DeadlineExceeded) {
		return "", fmt.Errorf("secret %s got no token within %s: is kube-controller-manager's token controller running?", name, timeout)
	}
	return token, err
}
