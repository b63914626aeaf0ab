package leader_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pinniped-kit/pinniped/agent/credentials/strategy"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/proxyconfig"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/tokenkeys"
)

func (f *fixture) pod(name, hash string, phase corev1.PodPhase, terminating bool) {
	f.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
		Labels: map[string]string{"app": "agent", "pod-template-hash": hash}}, Status: corev1.PodStatus{Phase: phase}}
	if terminating {
		now := metav1.Now()
		p.DeletionTimestamp = &now
	}
	pods := f.kube.CoreV1().Pods(ns)
	if _, err := pods.Get(context.Background(), name, metav1.GetOptions{}); err == nil {
		if _, err := pods.Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
			f.t.Fatal(err)
		}
		return
	}
	if _, err := pods.Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// TestTokenKeysWaitForOneVersion: the proxy's token keys are created only
// when no agent pod of another template (an older agent that cannot read
// proxy tokens) can still be reached, a draining one included.
func TestTokenKeysWaitForOneVersion(t *testing.T) {
	f := newFixture(t)
	f.c.PodName = "agent-new-1"
	f.pod("agent-new-1", "new", corev1.PodRunning, false)
	f.pod("agent-old-1", "old", corev1.PodRunning, false)
	f.pod("agent-older", "older", corev1.PodSucceeded, false) // ended: ignored

	_, _ = f.probe()
	if f.secret(proxyconfig.TokenKeySecret) != nil {
		t.Fatal("token keys created while an older agent replica runs")
	}
	f.pod("agent-old-1", "old", corev1.PodRunning, true)
	_, _ = f.probe()
	if f.secret(proxyconfig.TokenKeySecret) != nil {
		t.Fatal("token keys created while an older agent replica is still draining")
	}
	if err := f.kube.CoreV1().Pods(ns).Delete(context.Background(), "agent-old-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.pod("agent-new-2", "new", corev1.PodRunning, false)
	_, _ = f.probe()
	s := f.secret(proxyconfig.TokenKeySecret)
	if s == nil {
		t.Fatal("token keys not created once every replica runs one version")
	}
	if s.Labels["app.kubernetes.io/part-of"] != "pinniped" {
		t.Fatalf("token key Secret labels %v: uninstall would not find it", s.Labels)
	}

	// Once the keys exist, a later rollout does not stop their rotation.
	f.pod("agent-next", "next", corev1.PodRunning, false)
	f.c.Now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	_, _ = f.probe()
	if len(f.secret(proxyconfig.TokenKeySecret).Data["signing.key"]) == 0 {
		t.Fatal("the first key was not promoted after PromoteAfter")
	}
}

// TestTokenKeysOutsideACluster: an agent that is not a pod (development)
// has no other versions to wait for.
func TestTokenKeysOutsideACluster(t *testing.T) {
	f := newFixture(t)
	_, _ = f.probe()
	if f.secret(proxyconfig.TokenKeySecret) == nil {
		t.Fatal("token keys not created")
	}
}

// TestTokenKeyWaitIsLoggedOnce: while a rollout holds the token keys back,
// each probe finds the same wait and the same serving certificate; each is
// logged once, not both again at every probe because one replaced the
// other as "the last event".
func TestTokenKeyWaitIsLoggedOnce(t *testing.T) {
	f := newFixture(t)
	var buf bytes.Buffer
	f.c.Log = slog.New(slog.NewTextHandler(&buf, nil))
	f.c.PodName = "agent-new-1"
	f.pod("agent-new-1", "new", corev1.PodRunning, false)
	f.pod("agent-old-1", "old", corev1.PodRunning, false)
	f.setIngressAfterFirstProbe("10.99.1.2")
	for range 3 {
		if _, err := f.probe(); err != nil {
			t.Fatal(err)
		}
	}
	for _, msg := range []string{"proxy tokens wait until every agent replica runs this version", "using the generated serving certificate"} {
		if n := strings.Count(buf.String(), msg); n != 1 {
			t.Errorf("%q logged %d times in 3 probes:\n%s", msg, n, buf.String())
		}
	}
}

// setIngressAfterFirstProbe creates the LoadBalancer Service with an
// address, as a first probe and a cloud controller would.
func (f *fixture) setIngressAfterFirstProbe(ip string) {
	f.t.Helper()
	if _, err := f.probe(); !errors.Is(err, strategy.ErrPending) {
		f.t.Fatalf("first probe: %v", err)
	}
	f.setIngress(ip)
}

// TestFirstTokenKeyIsPromotedOnTime: once everything works the controller
// probes only every few minutes, and nothing it watches changes when a new
// key becomes due for promotion; the leader asks to be woken then, so the
// first tokens come PromoteAfter after the key, not a probe interval later.
func TestFirstTokenKeyIsPromotedOnTime(t *testing.T) {
	f := newFixture(t)
	kicked := make(chan struct{}, 10)
	f.c.Kick = func() { kicked <- struct{}{} }
	start := time.Now().Truncate(time.Second)
	clock := start
	f.c.Now = func() time.Time { return clock }
	_, _ = f.probe()
	if s := f.secret(proxyconfig.TokenKeySecret); s == nil || len(s.Data["signing.key"]) != 0 {
		t.Fatal("want a first key that does not sign yet")
	}
	// A moment before the key is due: the wake-up comes about then.
	clock = start.Add(tokenkeys.DefaultPromoteAfter - 500*time.Millisecond)
	_, _ = f.probe()
	select {
	case <-kicked:
	case <-time.After(10 * time.Second):
		t.Fatal("the leader did not ask to sync again when the first key is due for promotion")
	}
	clock = start.Add(tokenkeys.DefaultPromoteAfter)
	_, _ = f.probe()
	if len(f.secret(proxyconfig.TokenKeySecret).Data["signing.key"]) == 0 {
		t.Fatal("the first key was not promoted when due")
	}
}
