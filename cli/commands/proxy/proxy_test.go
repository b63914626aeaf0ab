package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pinniped-kit/pinniped/agent/apis/buildinfo"
	"github.com/pinniped-kit/pinniped/cli/commands"
	"github.com/pinniped-kit/pinniped/cli/commands/proxy"
	"github.com/pinniped-kit/pinniped/cli/front/handoff"
	"github.com/pinniped-kit/pinniped/cli/localproxy/localproxytest"
	"github.com/pinniped-kit/pinniped/cli/localproxy/state"
	"github.com/pinniped-kit/pinniped/cli/localproxy/targets"
)

// asCLI makes this test binary the pinniped CLI: client-go runs the
// proxy's kubeconfig's exec entry (this binary, through
// PINNIPED_CLI_PATH) as kubectl would.
const asCLI = "PROXY_TEST_AS_PINNIPED"

func TestMain(m *testing.M) {
	if os.Getenv(asCLI) == "1" {
		streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
		os.Exit(commands.Execute(context.Background(), streams, buildinfo.Info{Version: "test"}, os.Args[1:]))
	}
	os.Exit(m.Run())
}

func run(ctx context.Context, stdout, stderr *localproxytest.SyncBuffer, args ...string) int {
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: stdout, ErrOut: stderr}
	return commands.Execute(ctx, streams, buildinfo.Info{Version: "test"}, args)
}

func TestParseListenRefusesAllButLoopback(t *testing.T) {
	for listen, want := range map[string]string{
		"127.0.0.1:47443": "127.0.0.1",
		"[::1]:0":         "::1",
		"localhost:8443":  "127.0.0.1",
	} {
		if host, _, err := proxy.ParseListen(listen); err != nil || host != want {
			t.Errorf("%s: %q, %v; want %q", listen, host, err, want)
		}
	}
	for _, listen := range []string{"0.0.0.0:47443", ":47443", "[::]:47443", "192.168.1.10:47443", "example.com:47443", "127.0.0.1", "127.0.0.1:http",
		// Loopback, but not an address of the serving certificate: the
		// kubeconfig would name a server client-go refuses to trust.
		"127.0.0.2:1", "[::ffff:127.0.0.3]:1"} {
		if _, _, err := proxy.ParseListen(listen); err == nil {
			t.Errorf("%s was accepted", listen)
		}
	}
	var stdout, stderr localproxytest.SyncBuffer
	if code := run(context.Background(), &stdout, &stderr, "proxy", "--listen=0.0.0.0:47443", "--state-dir", t.TempDir()); code != 1 ||
		!strings.Contains(stderr.String(), "only on a loopback address") {
		t.Errorf("pinniped proxy --listen=0.0.0.0: exit %d, %q", code, stderr.String())
	}
}

func TestValidateContexts(t *testing.T) {
	dir := t.TempDir()
	kc := localproxytest.WriteKubeconfig(t, dir, localproxytest.NewAPIServer(t))
	cases := map[string]struct {
		args []string
		want string
	}{
		"unknown":      {[]string{"--context=nope"}, targets.ErrUnknownContext.Error()},
		"not pinniped": {[]string{"--context=other", "--context=dev"}, `context "other": its user does not run pinniped`},
		// Over the kubeconfig it reads, the person's own contexts would go.
		"out is the input": {[]string{"--kubeconfig-out", kc}, "is the kubeconfig the proxy reads its contexts from"},
	}
	for name, c := range cases {
		var stdout, stderr localproxytest.SyncBuffer
		args := append([]string{"proxy", "--kubeconfig", kc, "--state-dir", filepath.Join(dir, "state")}, c.args...)
		if code := run(context.Background(), &stdout, &stderr, args...); code != 1 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%s: exit %d, %q; want %q", name, code, stderr.String(), c.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "state")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: a refused start made the state directory (%v)", name, err)
		}
	}
}

// TestProxyServesThroughItsKubeconfig starts `pinniped proxy` in process
// and uses its kubeconfig as kubectl would (client-go, running the exec
// entry, this test binary as pinniped): the API server sees the login's
// credential, never the local secret. While it runs `pinniped proxy
// credential` prints the secret and `pinniped status` lists it; once it
// stops, both say it is not running.
func TestProxyServesThroughItsKubeconfig(t *testing.T) {
	dir := t.TempDir()
	a := localproxytest.NewAPIServer(t)
	kc := localproxytest.WriteKubeconfig(t, dir, a)
	// The default state directory, which pinniped status looks in.
	stateDir := filepath.Join(dir, "config", "pinniped", "proxy")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	t.Setenv(handoff.FrontPathEnv, exe)
	t.Setenv(asCLI, "1")
	t.Setenv("KUBECONFIG", kc)

	ctx, stop := context.WithCancel(context.Background())
	var stdout, stderr localproxytest.SyncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, &stdout, &stderr, "proxy", "--listen=127.0.0.1:0") }()
	defer func() {
		stop()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the proxy did not stop")
		}
	}()

	s := waitReady(t, stateDir, done, &stderr)
	out := filepath.Join(stateDir, proxy.KubeconfigName)
	for _, want := range []string{"dev", s.Address + "/ctx/", "export KUBECONFIG=" + out, "(1 other contexts do not use pinniped login"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the proxy's kubeconfig: %v, %v", fi, err)
	}

	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: out}, &clientcmd.ConfigOverrides{CurrentContext: "dev"}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ExecProvider == nil || cfg.ExecProvider.Args[0] != "proxy" || !strings.HasPrefix(cfg.Host, s.Address+"/ctx/") {
		t.Fatalf("the proxy's kubeconfig: %+v", cfg)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list through the proxy: %v\nproxy's stderr:\n%s", err, stderr.String())
	}
	if len(list.Items) != 1 || list.Items[0].Name != "seen-upstream" {
		t.Fatalf("list: %+v", list.Items)
	}
	secret, err := state.ReadSecret(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	seen := a.Seen()
	if len(seen) == 0 || seen[len(seen)-1] != "Bearer upstream-token" {
		t.Errorf("the API server saw Authorization %q; want the login's token", seen)
	}
	for _, auth := range seen {
		if strings.Contains(auth, string(secret)) {
			t.Errorf("the local secret reached the API server")
		}
	}
	if strings.Contains(stderr.String(), string(secret)) || strings.Contains(stderr.String(), "upstream-token") || stdout.String() != "" {
		t.Errorf("a secret was printed, or stdout is not empty: stdout %q, stderr:\n%s", stdout.String(), stderr.String())
	}

	// The exec plugin while the proxy runs.
	var cout, cerr localproxytest.SyncBuffer
	if code := run(context.Background(), &cout, &cerr, "proxy", "credential", "--state-dir", stateDir); code != 0 {
		t.Fatalf("proxy credential: exit %d, %s", code, cerr.String())
	}
	var ec struct {
		APIVersion string `json:"apiVersion"`
		Status     struct {
			Token               string `json:"token"`
			ExpirationTimestamp any    `json:"expirationTimestamp"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(cout.String()), &ec); err != nil || ec.APIVersion != "client.authentication.k8s.io/v1" ||
		ec.Status.Token != string(secret) || ec.Status.ExpirationTimestamp != nil {
		t.Errorf("proxy credential printed %q (%v); want a v1 ExecCredential with the secret and no expiry", cout.String(), err)
	}

	// pinniped status, while it runs.
	var sout, serr localproxytest.SyncBuffer
	if code := run(context.Background(), &sout, &serr, "status"); code != 0 {
		t.Fatalf("status: exit %d, %s", code, serr.String())
	}
	for _, want := range []string{"pinniped proxy: running (pid", s.Address, "dev", "ready"} {
		if !strings.Contains(sout.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, sout.String())
		}
	}
	if strings.Contains(sout.String()+serr.String(), string(secret)) {
		t.Error("status printed the secret")
	}

	// A second proxy on the same state directory is refused.
	var out2, err2 localproxytest.SyncBuffer
	if code := run(context.Background(), &out2, &err2, "proxy", "--listen=127.0.0.1:0", "--state-dir", stateDir); code != 1 ||
		!strings.Contains(err2.String(), "already running (pid") {
		t.Errorf("second proxy: exit %d, %q", code, err2.String())
	}

	stop()
	if code := <-done; code != 0 {
		t.Fatalf("the proxy stopped with exit %d:\n%s", code, stderr.String())
	}
	done <- 0 // for the deferred wait

	cout, cerr = localproxytest.SyncBuffer{}, localproxytest.SyncBuffer{}
	if code := run(context.Background(), &cout, &cerr, "proxy", "credential", "--state-dir", stateDir); code == 0 || cout.String() != "" ||
		!strings.Contains(cerr.String(), "pinniped proxy is not running: start it with `pinniped proxy` in a terminal") {
		t.Errorf("proxy credential, stopped: exit %d, stdout %q, stderr %q", code, cout.String(), cerr.String())
	}
	sout, serr = localproxytest.SyncBuffer{}, localproxytest.SyncBuffer{}
	if code := run(context.Background(), &sout, &serr, "status"); code != 0 || !strings.Contains(sout.String(), "pinniped proxy: not running") {
		t.Errorf("status, stopped: exit %d, %q %q", code, sout.String(), serr.String())
	}
}

// waitReady waits for state.json to say every context is ready.
func waitReady(t *testing.T, dir string, done chan int, stderr *localproxytest.SyncBuffer) *state.State {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case code := <-done:
			t.Fatalf("the proxy exited %d:\n%s", code, stderr.String())
		default:
		}
		s, err := state.Read(dir)
		if err == nil && s.Address != "" && len(s.Contexts) > 0 {
			ready := true
			for _, c := range s.Contexts {
				ready = ready && c.State == "ready"
			}
			if ready {
				return s
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the proxy did not become ready:\n%s", stderr.String())
	return nil
}
