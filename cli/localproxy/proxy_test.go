package localproxy_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/front/handoff"
	"github.com/pinniped-kit/pinniped/cli/localproxy"
	"github.com/pinniped-kit/pinniped/cli/localproxy/localproxytest"
	"github.com/pinniped-kit/pinniped/cli/localproxy/state"
	"github.com/pinniped-kit/pinniped/cli/localproxy/targets"
)

// TestRun: the proxy put together, without the command: given targets
// and a Factory it writes its state and kubeconfig, serves each context
// behind the local secret with the context's own credential, and on its
// context's end stops and removes the secret.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	upstream := localproxytest.NewAPIServer(t)
	raw, err := clientcmd.LoadFromFile(localproxytest.WriteKubeconfig(t, dir, upstream))
	if err != nil {
		t.Fatal(err)
	}
	ts, skipped, err := targets.Build(*raw, targets.Options{IsFront: handoff.IsFront})
	if err != nil || len(ts) != 1 {
		t.Fatalf("targets: %v, %v", ts, err)
	}
	var stderr localproxytest.SyncBuffer
	stateDir, out := filepath.Join(dir, "state"), filepath.Join(dir, "private", "proxy-kubeconfig")
	if err := os.Mkdir(filepath.Dir(out), 0o700); err != nil {
		t.Fatal(err)
	}
	f := cmdutil.Test(strings.NewReader(""), io.Discard, &stderr, map[string]string{"XDG_CONFIG_HOME": filepath.Join(dir, "config")})
	ctx, stop := context.WithCancel(context.Background())
	opts := localproxy.Options{
		Targets: ts, Skipped: skipped, Raw: *raw, Host: "127.0.0.1", Port: 0, Listen: "127.0.0.1:0",
		StateDir: stateDir, KubeconfigOut: out, FrontPath: "/usr/local/bin/pinniped", Factory: f,
	}
	// Profiles only where asked, and only on loopback.
	opts.ProfilingListen = "0.0.0.0:0"
	if err := localproxy.Run(ctx, opts); err == nil || !strings.Contains(err.Error(), "--profiling-listen") {
		t.Fatalf("Run with --profiling-listen=0.0.0.0:0: %v, want a refusal", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts.ProfilingListen = ln.Addr().String()
	_ = ln.Close()
	done := make(chan error, 1)
	go func() { done <- localproxy.Run(ctx, opts) }()

	var st *state.State
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, err = state.Read(stateDir)
		if err == nil && st != nil && st.Contexts[ts[0].Slug].State == "ready" {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned %v before serving:\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the context never became ready: %+v, %v\n%s", st, err, stderr.String())
		}
	}
	written, err := clientcmd.LoadFromFile(out)
	if err != nil {
		t.Fatal(err)
	}
	cluster := written.Clusters[written.Contexts["dev"].Cluster]
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cluster.CertificateAuthorityData)
	secret, err := state.RunningSecret(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true}}
	for _, auth := range []string{"", "Bearer " + string(secret)} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, cluster.Server+"/api/v1/namespaces", nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if want := map[bool]int{false: http.StatusUnauthorized, true: http.StatusOK}[auth != ""]; resp.StatusCode != want {
			t.Errorf("with the secret %v: HTTP %d, want %d", auth != "", resp.StatusCode, want)
		}
	}
	heap, err := http.Get("http://" + opts.ProfilingListen + "/debug/pprof/heap")
	if err != nil {
		t.Fatalf("the proxy's profiles: %v", err)
	}
	_ = heap.Body.Close()
	if heap.StatusCode != http.StatusOK {
		t.Errorf("the proxy's heap profile: HTTP %d", heap.StatusCode)
	}
	if got := upstream.Seen(); len(got) != 1 || got[0] != "Bearer upstream-token" {
		t.Errorf("the API server saw %q; want one request with the context's own credential", got)
	}
	for _, want := range []string{"dev", "export KUBECONFIG=" + out, "(1 other contexts do not use pinniped login"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the announcement lacks %q:\n%s", want, stderr.String())
		}
	}

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if _, err := state.RunningSecret(stateDir); err == nil {
		t.Error("the secret is still there after the proxy stopped")
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("the kubeconfig that uses the proxy is gone: %v", err)
	}
}
