package kubecertagent

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"

	"github.com/pinniped-kit/pinniped/agent/apis/helperpod"
)

// A replica that wins the election while it waits creates the helper then,
// instead of waiting out the whole bound for a Deployment nobody creates.
func TestReplicaThatBecomesLeaderWhileWaitingCreatesTheHelper(t *testing.T) {
	kube := fake.NewClientset()
	kube.PrependReactor("create", "deployments", startPod(t, kube))
	var polls atomic.Int32
	a := &Agent{Kube: kube, Namespace: "pinniped", Name: "pinniped-kube-cert-agent", Image: "agent:v1",
		Manage: func() bool { return polls.Add(1) > 3 }, PollInterval: 5 * time.Millisecond}
	kcm := kubeadmControllerManager()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	pod, err := a.helperPod(ctx, kcm, "/etc/kubernetes/pki/ca.crt", "/etc/kubernetes/pki/ca.key")
	if err != nil {
		t.Fatal(err)
	}
	if pod != "pinniped-kube-cert-agent-abc" || time.Since(start) > 5*time.Second {
		t.Fatalf("pod %q after %v", pod, time.Since(start))
	}
}

// A replica that never leads waits for the leader's helper pod and never
// writes the Deployment itself.
func TestFollowerOnlyWaits(t *testing.T) {
	kube := fake.NewClientset()
	a := &Agent{Kube: kube, Namespace: "pinniped", Name: "pinniped-kube-cert-agent", Image: "agent:v1",
		Manage: func() bool { return false }, PollInterval: 5 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, _ = a.helperPod(ctx, kubeadmControllerManager(), "/etc/kubernetes/pki/ca.crt", "/etc/kubernetes/pki/ca.key")
	for _, action := range kube.Actions() {
		if action.GetVerb() != "list" {
			t.Errorf("a follower did %s %s", action.GetVerb(), action.GetResource().Resource)
		}
	}
}

// A running helper of another configuration (the same image, another user)
// is not this agent's: a replica reads no key through it, and the leader
// replaces it. Here the replica leads from its third poll, as a new
// replica of an upgrade does once the old leader's lease runs out.
func TestHelperOfAnotherConfigurationIsReplaced(t *testing.T) {
	kube := fake.NewClientset()
	kcm := kubeadmControllerManager()
	cert, key := "/etc/kubernetes/pki/ca.crt", "/etc/kubernetes/pki/ca.key"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	old := &Agent{Kube: kube, Namespace: "pinniped", Name: "pinniped-kube-cert-agent", Image: "agent:v1"}
	kube.PrependReactor("create", "deployments", startPod(t, kube))
	if _, err := old.helperPod(ctx, kcm, cert, key); err != nil {
		t.Fatal(err)
	}
	// The Deployment controller's part for an update: the old pod goes,
	// the new template's runs.
	kube.PrependReactor("update", "deployments", func(action clienttesting.Action) (bool, runtime.Object, error) {
		d := action.(clienttesting.UpdateAction).GetObject().(*appsv1.Deployment)
		_ = kube.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "pinniped", d.Name+"-abc")
		return startPod(t, kube)(clienttesting.NewCreateAction(appsv1.SchemeGroupVersion.WithResource("deployments"), d.Namespace, d))
	})
	var polls atomic.Int32
	a := &Agent{Kube: kube, Namespace: "pinniped", Name: "pinniped-kube-cert-agent", Image: "agent:v1",
		Pod:    helperpod.Settings{RunAsUser: 1000, RunAsGroup: 1000},
		Manage: func() bool { return polls.Add(1) > 2 }, PollInterval: 5 * time.Millisecond}
	pod, err := a.helperPod(ctx, kcm, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	if polls.Load() < 3 {
		t.Fatalf("the helper of the old configuration was taken after %d polls", polls.Load())
	}
	got, err := kube.CoreV1().Pods("pinniped").Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := got.Spec.Containers[0].SecurityContext.RunAsUser; u == nil || *u != 1000 {
		t.Fatalf("read through a helper running as %v, want 1000", u)
	}
}

// A new leader racing the previous one to the Deployment tries again at
// the next poll instead of giving up on the signing key.
func TestLeaderRetriesAfterACreateRace(t *testing.T) {
	kube := fake.NewClientset()
	var creates atomic.Int32
	kube.PrependReactor("create", "deployments", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if creates.Add(1) == 1 {
			return true, nil, apierrors.NewAlreadyExists(appsv1.Resource("deployments"), "pinniped-kube-cert-agent")
		}
		return startPod(t, kube)(action)
	})
	a := &Agent{Kube: kube, Namespace: "pinniped", Name: "pinniped-kube-cert-agent", Image: "agent:v1",
		Manage: func() bool { return true }, PollInterval: 5 * time.Millisecond}
	kcm := kubeadmControllerManager()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if pod, err := a.helperPod(ctx, kcm, "/etc/kubernetes/pki/ca.crt", "/etc/kubernetes/pki/ca.key"); err != nil || pod != "pinniped-kube-cert-agent-abc" || creates.Load() != 2 {
		t.Fatalf("pod %q, err %v, %d creates", pod, err, creates.Load())
	}
}

// startPod plays the Deployment controller's part: a running pod once the
// Deployment is created.
func startPod(t *testing.T, kube *fake.Clientset) clienttesting.ReactionFunc {
	return func(action clienttesting.Action) (bool, runtime.Object, error) {
		d := action.(clienttesting.CreateAction).GetObject().(*appsv1.Deployment)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: d.Name + "-abc", Namespace: d.Namespace, Labels: d.Spec.Template.Labels, Annotations: d.Spec.Template.Annotations},
			Spec:       d.Spec.Template.Spec,
			Status:     corev1.PodStatus{Phase: corev1.PodRunning},
		}
		if err := kube.Tracker().Add(pod); err != nil {
			t.Error(err)
		}
		return false, nil, nil
	}
}

// kubeadmControllerManager is the controller manager pod kubeadm makes: it
// mounts all of /etc/kubernetes/pki and more of the node.
func kubeadmControllerManager() *corev1.Pod {
	dir := corev1.HostPathDirectoryOrCreate
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-controller-manager-node", Namespace: "kube-system"},
		Spec: corev1.PodSpec{NodeName: "node",
			Containers: []corev1.Container{{Name: "kube-controller-manager",
				Command: []string{"kube-controller-manager", "--cluster-signing-cert-file=/etc/kubernetes/pki/ca.crt", "--cluster-signing-key-file=/etc/kubernetes/pki/ca.key"},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "ca-certs", MountPath: "/etc/ssl/certs", ReadOnly: true},
					{Name: "k8s-certs", MountPath: "/etc/kubernetes/pki", ReadOnly: true},
					{Name: "kubeconfig", MountPath: "/etc/kubernetes/controller-manager.conf", ReadOnly: true},
					{Name: "flexvolume-dir", MountPath: "/usr/libexec/kubernetes/kubelet-plugins/volume/exec"},
				}}},
			Volumes: []corev1.Volume{
				{Name: "ca-certs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc/ssl/certs", Type: &dir}}},
				{Name: "k8s-certs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/kubernetes/pki", Type: &dir}}},
				{Name: "kubeconfig", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc/kubernetes/controller-manager.conf"}}},
				{Name: "flexvolume-dir", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/usr/libexec/kubernetes/kubelet-plugins/volume/exec", Type: &dir}}},
			},
		},
	}
}

// TestHelperMountsOnlyTheSigningFiles: the helper sees the two files it
// reads, read-only, and nothing else of the node; it keeps no capability,
// runs with the runtime's seccomp profile and cannot write its own files.
func TestHelperMountsOnlyTheSigningFiles(t *testing.T) {
	kube := fake.NewClientset()
	a := &Agent{Kube: kube, Namespace: "pinniped", Name: "pinniped-kube-cert-agent", Image: "agent:v1"}
	kcm := kubeadmControllerManager()
	cert, key := signingFiles(kcm)
	if err := a.ensureDeployment(context.Background(), kcm, cert, key); err != nil {
		t.Fatal(err)
	}
	d, err := kube.AppsV1().Deployments("pinniped").Get(context.Background(), "pinniped-kube-cert-agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := d.Spec.Template.Spec
	want := map[string]string{"/etc/kubernetes/pki/ca.crt": "/srv/kubernetes/pki/ca.crt", "/etc/kubernetes/pki/ca.key": "/srv/kubernetes/pki/ca.key"}
	if len(spec.Volumes) != 2 || len(spec.Containers) != 1 || len(spec.Containers[0].VolumeMounts) != 2 {
		t.Fatalf("volumes %+v, containers %d", spec.Volumes, len(spec.Containers))
	}
	for _, m := range spec.Containers[0].VolumeMounts {
		var v *corev1.Volume
		for i := range spec.Volumes {
			if spec.Volumes[i].Name == m.Name {
				v = &spec.Volumes[i]
			}
		}
		if v == nil || v.HostPath == nil || v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathFile || want[m.MountPath] != v.HostPath.Path || !m.ReadOnly {
			t.Errorf("mount %+v of volume %+v; want the file %s read-only", m, v, want[m.MountPath])
		}
	}
	sc, psc := spec.Containers[0].SecurityContext, spec.SecurityContext
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v: want seccomp RuntimeDefault", psc)
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0 {
		t.Errorf("container security context %+v", sc)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken || spec.HostPID || spec.HostIPC || spec.HostNetwork {
		t.Errorf("pod spec grants more than needed: %+v", spec)
	}

	// A controller manager whose key is not on a hostPath cannot be served;
	// a helper made earlier (maybe by a version that mounted more) stops.
	inImage := kubeadmControllerManager()
	inImage.Spec.Containers[0].VolumeMounts = nil
	if err := a.ensureDeployment(context.Background(), inImage, cert, key); err == nil || !strings.Contains(err.Error(), "no hostPath volume") {
		t.Fatalf("key outside any hostPath: %v", err)
	}
	d, _ = kube.AppsV1().Deployments("pinniped").Get(context.Background(), "pinniped-kube-cert-agent", metav1.GetOptions{})
	if *d.Spec.Replicas != 0 || len(d.Spec.Template.Spec.Volumes) != 0 || len(d.Spec.Template.Spec.Containers[0].VolumeMounts) != 0 {
		t.Fatalf("the earlier helper still runs: %+v", d.Spec)
	}
	// Once the key is reachable again, the helper comes back.
	if err := a.ensureDeployment(context.Background(), kcm, cert, key); err != nil {
		t.Fatal(err)
	}
	d, _ = kube.AppsV1().Deployments("pinniped").Get(context.Background(), "pinniped-kube-cert-agent", metav1.GetOptions{})
	if *d.Spec.Replicas != 1 || len(d.Spec.Template.Spec.Volumes) != 2 {
		t.Fatalf("the helper did not come back: %+v", d.Spec)
	}
}

// The helper runs as the user and group it is given (root by default), and
// its Deployment takes the strategy it is given, also on an existing
// Deployment: a switch to Recreate drops RollingUpdate's parameters, which
// the API server refuses beside Recreate.
func TestHelperPodSettings(t *testing.T) {
	kube := fake.NewClientset()
	ctx := context.Background()
	kcm := kubeadmControllerManager()
	cert, key := signingFiles(kcm)
	get := func() *appsv1.Deployment {
		t.Helper()
		d, err := kube.AppsV1().Deployments("pinniped").Get(ctx, "helper", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a := &Agent{Kube: kube, Namespace: "pinniped", Name: "helper", Image: "agent:v1"}
	if err := a.ensureDeployment(ctx, kcm, cert, key); err != nil {
		t.Fatal(err)
	}
	d := get()
	sc := d.Spec.Template.Spec.Containers[0].SecurityContext
	if sc.RunAsUser == nil || *sc.RunAsUser != 0 || sc.RunAsGroup == nil || *sc.RunAsGroup != 0 || sc.RunAsNonRoot != nil || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Fatalf("default: user %v group %v strategy %+v; want root and RollingUpdate", sc.RunAsUser, sc.RunAsGroup, d.Spec.Strategy)
	}
	// As the API server defaults it.
	quarter := intstr.FromString("25%")
	d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &quarter, MaxUnavailable: &quarter}
	if _, err := kube.AppsV1().Deployments("pinniped").Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	a.Pod = helperpod.Settings{RunAsUser: 1000, RunAsGroup: 2000, Strategy: helperpod.Recreate}
	if err := a.ensureDeployment(ctx, kcm, cert, key); err != nil {
		t.Fatal(err)
	}
	d = get()
	sc = d.Spec.Template.Spec.Containers[0].SecurityContext
	if *sc.RunAsUser != 1000 || *sc.RunAsGroup != 2000 || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("user %d group %d non-root %v, want 1000, 2000 and true", *sc.RunAsUser, *sc.RunAsGroup, sc.RunAsNonRoot)
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || d.Spec.Strategy.RollingUpdate != nil {
		t.Errorf("strategy %+v, want Recreate alone", d.Spec.Strategy)
	}
}

// An API server (or a proxy in front of it) that cannot upgrade exec to
// WebSocket is asked again over SPDY, as kubectl does. client-go names
// that refusal with k8s.io/streaming's error type; a check against
// apimachinery's older copy of the type never matches, and the helper's
// files could not be read on such a cluster.
func TestExecFallsBackToSPDYWhenWebSocketIsRefused(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+strings.ToLower(r.Header.Get("Upgrade")))
		mu.Unlock()
		http.Error(w, "no upgrades here", http.StatusBadRequest)
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{Kube: kube, Rest: cfg, Namespace: "pinniped"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if err := a.exec(ctx, "helper", []string{"cat", "/ca.crt"}, &stdout, &stderr); err == nil {
		t.Fatal("exec succeeded against a server that upgrades nothing")
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(seen, []string{"GET websocket", "POST spdy/3.1"}) {
		t.Fatalf("requests: %q, want a WebSocket GET and then a SPDY POST", seen)
	}
}

// Replicas that find different kube-controller-manager pods (another node,
// another host path) want the same helper: only the agent's own settings
// tell one helper from another.
func TestTemplateHashIsTheAgentsSettingsOnly(t *testing.T) {
	a := &Agent{Namespace: "pinniped", Name: "helper", Image: "agent:v1"}
	cert, key := "/etc/kubernetes/pki/ca.crt", "/etc/kubernetes/pki/ca.key"
	one := kubeadmControllerManager()
	other := kubeadmControllerManager()
	other.Spec.NodeName = "node-2"
	other.Spec.Volumes[1].HostPath.Path = "/var/lib/kubernetes/pki"
	hash := func(a *Agent, kcm *corev1.Pod) string {
		t.Helper()
		d, err := a.wantDeployment(kcm, cert, key)
		if err != nil {
			t.Fatal(err)
		}
		return d.Spec.Template.Annotations[specAnnotation]
	}
	if h1, h2 := hash(a, one), hash(a, other); h1 == "" || h1 != h2 {
		t.Errorf("the same settings hash to %q and %q", h1, h2)
	}
	b := *a
	b.Pod.Strategy = helperpod.Recreate // the Deployment's, not the pod's
	c := *a
	c.Pod.RunAsUser = 1000
	if hash(&b, one) != hash(a, one) || hash(&c, one) == hash(a, one) {
		t.Error("the hash follows the strategy, or not the user")
	}
}
