package testbed

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// clusterInfoRole is the Role and RoleBinding kubeadm makes so that
// anyone may read kube-public/cluster-info.
const clusterInfoRole = "kubeadm:bootstrap-signer-clusterinfo"

// kubeadmObjects makes what kubeadm makes and a cluster set up by hand
// would lack: the control-plane label on the node (kubelet may not set
// node-role labels on itself, NodeRestriction), and the public
// kube-public/cluster-info ConfigMap, with the cluster's server and CA,
// that anonymous clients may read (upstream Pinniped's signing-key strategy
// reads it; our agent reports its server when it exists).
func kubeadmObjects(ctx context.Context, cs *kubernetes.Clientset, cfg Config) error {
	patch := []byte(`{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":""}}}`)
	if _, err := cs.CoreV1().Nodes().Patch(ctx, cfg.NodeName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("label node as control plane: %w", err)
	}
	ca, err := os.ReadFile(cfg.ClusterCAFile())
	if err != nil {
		return err
	}
	// As kubeadm writes it: one cluster, no users or contexts.
	kc := clientcmdapi.NewConfig()
	kc.Clusters[""] = &clientcmdapi.Cluster{Server: cfg.APIServerURL(), CertificateAuthorityData: ca}
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	const ns = "kube-public"
	objs := []func() error{
		func() error {
			_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cluster-info", Namespace: ns},
				Data: map[string]string{"kubeconfig": string(raw)}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: clusterInfoRole, Namespace: ns},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"cluster-info"}, Verbs: []string{"get"}}},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: clusterInfoRole, Namespace: ns},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: clusterInfoRole},
				Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "system:anonymous"}},
			}, metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range objs {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create kubeadm's kube-public/cluster-info: %w", err)
		}
	}
	return nil
}
