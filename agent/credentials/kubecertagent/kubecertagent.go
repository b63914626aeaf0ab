// Package kubecertagent reads the cluster's signing certificate and key, on
// clusters where kube-controller-manager runs as a pod (kubeadm, kind): it
// runs a small pod beside the controller manager with the same node and key
// mounts, and reads the files through pods/exec into memory. The key is never
// written to a Secret or to disk by the agent.
package kubecertagent

import (
	"bytes"
	"context"
	"crypto/fips140"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/pinniped-kit/pinniped/agent/apis/helperpod"
	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
)

// Labels of the helper Deployment; part-of lets uninstall find it.
var podLabels = map[string]string{
	"app.kubernetes.io/part-of":    "pinniped",
	"app.kubernetes.io/component":  "kube-cert-agent",
	"kube-cert-agent.pinniped.dev": "v1",
}

// Defaults when the controller manager's flags name no files.
const (
	defaultCertPath = "/etc/kubernetes/ca/ca.pem"
	defaultKeyPath  = "/etc/kubernetes/ca/ca.key"
)

// Agent fetches the signing key.
type Agent struct {
	Kube      kubernetes.Interface
	Rest      *rest.Config
	Namespace string
	Name      string // of the helper Deployment
	Image     string // the agent's own image; it has the `kube-cert-agent` command
	// Pod is who the helper runs as and its Deployment's strategy; the
	// zero value is root and Kubernetes' default strategy.
	Pod helperpod.Settings
	// Manage is true on the leader, which creates and updates the Deployment.
	Manage func() bool
	Now    func() time.Time
	// PollInterval is how often to look for the helper pod (default 1s).
	PollInterval time.Duration
}

// ErrNoControllerManager means this cluster keeps its control plane out of
// reach, as managed clusters do; the CSR API or the impersonation proxy
// must be used instead.
var ErrNoControllerManager = errors.New("no running kube-controller-manager pod in kube-system (expected on EKS, GKE, AKS and other managed clusters)")

// Fetch returns a CA loaded from the cluster's signing certificate and key.
func (a *Agent) Fetch(ctx context.Context) (*certauthority.CA, error) {
	kcm, err := a.findControllerManager(ctx)
	if err != nil {
		return nil, err
	}
	certPath, keyPath := signingFiles(kcm)
	pod, err := a.helperPod(ctx, kcm, certPath, keyPath)
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	// Found through the image's PATH, so any image layout works (ko puts
	// the binary under /ko-app).
	if err := a.exec(ctx, pod, []string{"pinniped-agent", "kube-cert-agent", "print", certPath, keyPath}, &stdout, &stderr); err != nil {
		return nil, fmt.Errorf("read the signing key through pod %s/%s: %w: %s", a.Namespace, pod, err, strings.TrimSpace(stderr.String()))
	}
	var files struct {
		Cert string `json:"tls.crt"`
		Key  string `json:"tls.key"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &files); err != nil {
		return nil, fmt.Errorf("unreadable answer from the kube-cert-agent pod: %w", err)
	}
	ca, err := certauthority.Load([]byte(files.Cert), []byte(files.Key), a.Now)
	if err != nil {
		return nil, fmt.Errorf("the signing files %s and %s: %w", certPath, keyPath, err)
	}
	return ca, nil
}

// findControllerManager prefers the newest running pod.
func (a *Agent) findControllerManager(ctx context.Context) (*corev1.Pod, error) {
	pods, err := a.Kube.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "component=kube-controller-manager"})
	if err != nil {
		return nil, fmt.Errorf("list kube-controller-manager pods: %w", err)
	}
	var running []corev1.Pod
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" {
			running = append(running, p)
		}
	}
	if len(running) == 0 {
		return nil, ErrNoControllerManager
	}
	sort.Slice(running, func(i, j int) bool { return running[j].CreationTimestamp.Before(&running[i].CreationTimestamp) })
	return &running[0], nil
}

// signingFiles reads the controller manager's flags for the client signer's
// files, preferring the kube-apiserver-client specific ones.
func signingFiles(p *corev1.Pod) (cert, key string) {
	flags := map[string]string{}
	for _, c := range p.Spec.Containers {
		for _, arg := range append(append([]string{}, c.Command...), c.Args...) {
			if k, v, ok := strings.Cut(strings.TrimPrefix(arg, "--"), "="); ok {
				flags[k] = v
			}
		}
	}
	cert, key = flags["cluster-signing-kube-apiserver-client-cert-file"], flags["cluster-signing-kube-apiserver-client-key-file"]
	if cert == "" || key == "" {
		cert, key = flags["cluster-signing-cert-file"], flags["cluster-signing-key-file"]
	}
	if cert == "" || key == "" {
		return defaultCertPath, defaultKeyPath
	}
	return cert, key
}

// hostFile is where a file the controller manager sees at path lives on
// its node: under the hostPath volume mounted deepest above path.
func hostFile(kcm *corev1.Pod, path string) (string, error) {
	var best *corev1.VolumeMount
	for _, c := range kcm.Spec.Containers {
		for i, m := range c.VolumeMounts {
			mp := strings.TrimSuffix(m.MountPath, "/")
			if (path == mp || strings.HasPrefix(path, mp+"/")) && (best == nil || len(mp) > len(strings.TrimSuffix(best.MountPath, "/"))) {
				best = &c.VolumeMounts[i]
			}
		}
	}
	if best != nil {
		for _, v := range kcm.Spec.Volumes {
			if v.Name != best.Name || v.HostPath == nil {
				continue
			}
			rest := strings.TrimPrefix(path, strings.TrimSuffix(best.MountPath, "/"))
			return filepath.Join(v.HostPath.Path, best.SubPath, rest), nil
		}
	}
	return "", fmt.Errorf("kube-controller-manager pod %s/%s reads %s from no hostPath volume; the agent cannot mount it (use the CSR API strategy)", kcm.Namespace, kcm.Name, path)
}

// ensureDeployment runs one helper pod on the controller manager's node
// that mounts only the two signing files, read-only, and nothing else of
// the node's; by default it runs as root only because kubeadm's key is
// root's (0600), and always with no capabilities, a read-only root
// filesystem, the runtime's default seccomp profile, and no ServiceAccount
// token.
func (a *Agent) ensureDeployment(ctx context.Context, kcm *corev1.Pod, certPath, keyPath string) error {
	want, err := a.wantDeployment(kcm, certPath, keyPath)
	if err != nil {
		return errors.Join(err, a.disableHelper(ctx))
	}
	return a.applyDeployment(ctx, want)
}

// specAnnotation carries a hash of the helper's pod template on the pod: a
// running helper is this agent's only if it runs the template this agent
// wants (its image, and who it runs as), so a replica never reads the key
// through a helper an earlier configuration made, and waits instead for
// the leader to replace it.
const specAnnotation = "kube-cert-agent.pinniped.dev/template"

// wantDeployment is the helper's Deployment for kcm's signing files, its
// pod template stamped with specAnnotation.
func (a *Agent) wantDeployment(kcm *corev1.Pod, certPath, keyPath string) (*appsv1.Deployment, error) {
	fileType := corev1.HostPathFile
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	for _, f := range []struct{ name, path string }{{"signing-cert", certPath}, {"signing-key", keyPath}} {
		onHost, err := hostFile(kcm, f.path)
		if err != nil {
			return nil, err
		}
		volumes = append(volumes, corev1.Volume{Name: f.name, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: onHost, Type: &fileType}}})
		mounts = append(mounts, corev1.VolumeMount{Name: f.name, MountPath: f.path, ReadOnly: true})
	}
	one, no, yes := int32(1), false, true
	user, group := a.Pod.RunAsUser, a.Pod.RunAsGroup
	// Another user than root is there to satisfy a policy that forbids
	// root pods; such policies (Pod Security's restricted level among
	// them) also want the pod to say it never runs as root.
	var nonRoot *bool
	if user != 0 {
		nonRoot = &yes
	}
	// An empty type is defaulted by the API server to RollingUpdate with its
	// parameters; Recreate must carry none (a switch from RollingUpdate
	// would be refused if the old parameters stayed).
	strategy := appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType}
	if a.Pod.Strategy == helperpod.Recreate {
		strategy.Type = appsv1.RecreateDeploymentStrategyType
	}
	want := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: a.Name, Namespace: a.Namespace, Labels: podLabels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Strategy: strategy,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"kube-cert-agent.pinniped.dev": "v1"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					NodeName:                     kcm.Spec.NodeName,
					NodeSelector:                 kcm.Spec.NodeSelector,
					Tolerations:                  append(kcm.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists}),
					AutomountServiceAccountToken: &no,
					Volumes:                      volumes,
					SecurityContext: &corev1.PodSecurityContext{
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:            "sleeper",
						Image:           a.Image,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Args:            []string{"kube-cert-agent", "sleep"},
						VolumeMounts:    mounts,
						SecurityContext: &corev1.SecurityContext{
							RunAsUser:                &user,
							RunAsGroup:               &group,
							RunAsNonRoot:             nonRoot,
							AllowPrivilegeEscalation: &no,
							ReadOnlyRootFilesystem:   &yes,
							// The key's owner reads it as its owner; no capability is needed.
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")},
						},
					}},
				},
			},
		},
	}
	// Only what this agent's configuration decides goes into the hash:
	// the node, tolerations and host paths come from whichever
	// kube-controller-manager pod a replica found, and replicas may find
	// different ones (several control-plane nodes, pods recreated by an
	// upgrade) while a helper on any of them serves.
	c := want.Spec.Template.Spec.Containers[0]
	raw, err := json.Marshal(struct {
		Image           string
		Args            []string
		Mounts          []corev1.VolumeMount
		SecurityContext *corev1.SecurityContext
		Resources       corev1.ResourceRequirements
	}{c.Image, c.Args, c.VolumeMounts, c.SecurityContext, c.Resources})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(raw)
	want.Spec.Template.Annotations = map[string]string{specAnnotation: hex.EncodeToString(sum[:8])}
	return want, nil
}

// applyDeployment creates the helper's Deployment, or makes the existing
// one want.
func (a *Agent) applyDeployment(ctx context.Context, want *appsv1.Deployment) error {
	deployments := a.Kube.AppsV1().Deployments(a.Namespace)
	got, err := deployments.Get(ctx, a.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = deployments.Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	got.Spec.Template = want.Spec.Template
	if got.Spec.Strategy.Type != want.Spec.Strategy.Type {
		got.Spec.Strategy = want.Spec.Strategy
	}
	got.Spec.Replicas = want.Spec.Replicas // back from disableHelper
	got.Labels = want.Labels
	_, err = deployments.Update(ctx, got, metav1.UpdateOptions{})
	return err
}

// disableHelper stops a helper an earlier version made (which may mount
// more of the node) when this one cannot run it: no replicas, no volumes.
func (a *Agent) disableHelper(ctx context.Context) error {
	deployments := a.Kube.AppsV1().Deployments(a.Namespace)
	got, err := deployments.Get(ctx, a.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	zero := int32(0)
	got.Spec.Replicas = &zero
	// Nor may its pod, if someone scales it up again, pass for a helper.
	delete(got.Spec.Template.Annotations, specAnnotation)
	got.Spec.Template.Spec.Volumes = nil
	for i := range got.Spec.Template.Spec.Containers {
		got.Spec.Template.Spec.Containers[i].VolumeMounts = nil
	}
	_, err = deployments.Update(ctx, got, metav1.UpdateOptions{})
	return err
}

// helperWait bounds the wait for the helper pod.
const helperWait = 90 * time.Second

// helperPod waits for a running helper pod. Only the leader manages the
// helper's Deployment, and every replica waits as long for its pod, so all
// load the key within a poll of each other: a replica without it issues
// through the CSR API meanwhile, with certificates of a different
// lifetime. Leadership is asked again at each poll because replicas start
// fetching before the election is decided; otherwise the new leader would
// wait out the whole bound for a Deployment nobody creates.
func (a *Agent) helperPod(ctx context.Context, kcm *corev1.Pod, certPath, keyPath string) (string, error) {
	want, err := a.wantDeployment(kcm, certPath, keyPath)
	if err != nil {
		if a.Manage == nil || a.Manage() {
			err = errors.Join(err, a.disableHelper(ctx))
		}
		return "", err
	}
	ensured := false
	return a.readyPod(ctx, helperWait, want.Spec.Template.Annotations[specAnnotation], func() (bool, error) {
		if ensured || (a.Manage != nil && !a.Manage()) {
			return false, nil
		}
		if err := a.applyDeployment(ctx, want); err != nil {
			// The previous leader may be writing it at this moment.
			if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
				return false, nil
			}
			return false, err
		}
		ensured = true
		// The pod still has to be scheduled and started.
		return true, nil
	})
}

// readyPod polls for a running helper pod of the template whose hash is
// template (specAnnotation), calling each before every poll; each may
// restart the wait.
func (a *Agent) readyPod(ctx context.Context, wait time.Duration, template string, each func() (restart bool, err error)) (string, error) {
	deadline := time.Now().Add(wait)
	poll := a.PollInterval
	if poll == 0 {
		poll = time.Second
	}
	for {
		restart, err := each()
		if err != nil {
			return "", err
		}
		if restart {
			deadline = time.Now().Add(wait)
		}
		pods, err := a.Kube.CoreV1().Pods(a.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "kube-cert-agent.pinniped.dev=v1"})
		if err != nil {
			return "", err
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Annotations[specAnnotation] == template {
				return p.Name, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no running kube-cert-agent pod in %s after %v (kubectl -n %s describe pods -l kube-cert-agent.pinniped.dev=v1)", a.Namespace, wait, a.Namespace)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(poll):
		}
	}
}

func (a *Agent) exec(ctx context.Context, pod string, command []string, stdout, stderr *bytes.Buffer) error {
	req := a.Kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(a.Namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "sleeper", Command: command, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(a.Rest, "GET", req.URL().String())
	if err != nil {
		return err
	}
	spdy, err := remotecommand.NewSPDYExecutor(a.Rest, "POST", req.URL())
	if err != nil {
		return err
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	// The WebSocket handshake (RFC 6455) checks the server's answer with
	// SHA-1, which FIPS 140-only mode refuses: a panic in this goroutine
	// that kills the agent. It is no security function (the answer only
	// proves the server speaks WebSocket), which is what Go's escape is
	// for. TLS underneath keeps FIPS mode's rules: those follow the mode,
	// not its enforcement.
	fips140.WithoutEnforcement(func() {
		err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: stdout, Stderr: stderr})
	})
	return err
}
