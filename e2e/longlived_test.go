//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pinniped-kit/pinniped/cli/localproxy/state"
	"github.com/pinniped-kit/pinniped/e2e/internal/longclient"
	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

const longLivedNS = "longlived-e2e"

// TestLongLived runs a client written like k9s (e2e/internal/longclient: one
// rest.Config from alice's kubeconfig, a watch, `logs -f`, exec and
// port-forward over WebSocket and SPDY, a GET every few seconds) through
// credential renewals, and counts what the renewals cut.
//
// client-go closes every connection of a rest.Config when its exec plugin
// hands it a different client certificate, and never for a new token; so a
// user whose credential is a certificate loses all their streams at each
// renewal (issue 29). On the kubeadm profile the control shows the harness
// sees that, pinniped proxy must cut nothing, and a full-screen client run
// beside them all along must show nothing of its renewals; the managed
// profile's impersonation proxy must cut nothing.
func TestLongLived(t *testing.T) {
	// A 1-minute credential lifetime (the shortest the agent takes), so that
	// three renewals take three minutes instead of fifteen. installAgent
	// installs this test's own agent and uninstalls it afterwards, so no
	// other test runs with it.
	pinniped := installAgent(t, "--credential-ttl=1m")

	Kubectl(t, "create", "namespace", longLivedNS)
	t.Cleanup(func() { _, _ = RunE(nil, "kubectl", "delete", "namespace", longLivedNS, "--wait=false") })
	Kubectl(t, "-n", longLivedNS, "create", "rolebinding", "developers-edit", "--clusterrole=edit", "--group=developers")
	image := ImportImage(t, "./e2e/internal/testserver", testImageRepo)
	applyYAML(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: ticker, namespace: %s}
spec:
  containers:
  - {name: main, image: %s, imagePullPolicy: Never, args: [ticker, --addr, ":8080"]}
`, longLivedNS, image))
	Kubectl(t, "-n", longLivedNS, "wait", "--for=condition=Ready", "pod/ticker", "--timeout=90s")

	if Bed.Config().Profile == testbed.ProfileManaged {
		t.Run("impersonation-proxy", func(t *testing.T) {
			strategy := waitProxyStrategy(t, "the proxy is advertised", proxySucceeds)
			// The proxy hands out certificates until the leader's first
			// token key signs, and the one switch from a certificate to a
			// token would close client-go's connections: start on tokens.
			ourInstall.waitProxyToken(t, strategy, PasswordLogin(t, context.Background(), testbed.DexUsers[0]).Extra("id_token").(string))
			kc := userKubeconfig(t, pinniped, "--oidc-flow=password", "--credential-cache=file")
			if server := Run(t, []string{"KUBECONFIG=" + kc}, "kubectl", "config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}"); server != strategy.Endpoint {
				t.Fatalf("kubeconfig server %q, want the impersonation proxy %q", server, strategy.Endpoint)
			}
			rep := runLongClient(t, kc, 3, nil)
			if len(rep.Cuts) != 0 {
				t.Errorf("through the impersonation proxy, credential renewals cut %d streams, want none:\n%s", len(rep.Cuts), rep.Summary())
			}
			t.Run("control: certificates through the same proxy", func(t *testing.T) {
				// What tokens spare: a client certificate of the proxy's
				// signer, new at each renewal, through the same proxy. The
				// harness must see client-go cut the streams.
				rep := runLongClient(t, rotatingCertKubeconfig(t, strategy), 1, nil)
				if len(rep.Cuts) == 0 {
					t.Errorf("renewed client certificates through the proxy cut nothing: the harness is blind:\n%s", rep.Summary())
				}
			})
		})
		return
	}

	// A full-screen client beside the others, all along: the renewals of
	// its own exec plugin, which writes to its terminal, draw nothing
	// there (issue 31's quiet renewals).
	screen := startFullScreen(t, pinniped, false)
	// The control: the same client, whose plugin writes one line at each
	// renewal; the same check must see it.
	noisy := startFullScreen(t, pinniped, true)
	// kubectl's own stderr: a call after the cached credential expired
	// (a real renewal, not a new cache key) writes nothing there.
	quiet := startExpiredRenewal(t, pinniped)

	t.Run("control", func(t *testing.T) {
		// alice's direct kubeconfig: a client certificate per renewal. One
		// renewal is enough to show the harness sees the cut.
		kc := userKubeconfig(t, pinniped, "--oidc-flow=password", "--credential-cache=file")
		rep := runLongClient(t, kc, 1, nil)
		if len(rep.Cuts) == 0 {
			t.Errorf("a renewed client certificate cut nothing: client-go closes all of a rest.Config's connections when its certificate changes, so the harness is blind:\n%s", rep.Summary())
		}
	})

	t.Run("pinniped proxy", func(t *testing.T) {
		// The same client through `pinniped proxy`, which renews alice's
		// certificates itself: client-go holds the proxy's constant local
		// secret, and the proxy lets streams run on the connections of the
		// certificate they started with.
		kc := userKubeconfig(t, pinniped, "--oidc-flow=password", "--credential-cache=file")
		proxied, stateDir := startLocalProxy(t, pinniped, kc)
		// Each renewal the proxy counts must bring a credential that
		// expires later than the last one, or the count proves nothing.
		seen := map[string][]time.Time{} // context: expiry at each renewal count
		var went []string
		rep := runLongClient(t, proxied, 3, func() int {
			st, err := state.Read(stateDir)
			if err != nil || st == nil {
				return 0
			}
			n := 0
			for slug, c := range st.Contexts {
				n += max(c.Renewals-1, 0) // the first credential is no renewal
				exp := seen[slug]
				if c.Renewals > len(exp) && !c.Expires.IsZero() {
					if len(exp) > 0 && !c.Expires.After(exp[len(exp)-1]) {
						went = append(went, fmt.Sprintf("%s: renewal %d expires %s, not after %s", slug, c.Renewals, c.Expires, exp[len(exp)-1]))
					}
					seen[slug] = append(exp, c.Expires)
				}
			}
			return n
		})
		if len(rep.Cuts) != 0 {
			t.Errorf("through pinniped proxy, credential renewals cut %d streams, want none:\n%s", len(rep.Cuts), rep.Summary())
		}
		total := 0
		for _, exp := range seen {
			total += len(exp)
		}
		if len(went) != 0 || total < 4 {
			t.Errorf("the upstream credential's expiry at the proxy's renewals (%d seen, want 4 and each later): %v %v", total, seen, went)
		}
	})

	t.Run("quiet full-screen client", func(t *testing.T) { screen.finish(t, 2) })
	t.Run("control: a full-screen client whose plugin talks at a renewal", func(t *testing.T) {
		if _, err := noisy.verdict(1); err == nil || !strings.Contains(err.Error(), "foreign text") || !strings.Contains(err.Error(), "renewed the credential") {
			t.Errorf("the screen check missed the line a renewal wrote: %v", err)
		}
	})
	t.Run("kubectl's stderr on a renewal of an expired credential", func(t *testing.T) { quiet(t) })
}

// rotatingCertKubeconfig is a kubeconfig for alice at the impersonation
// proxy whose exec plugin hands over a client certificate of the proxy's
// signer that changes each minute, with a one-minute expiry: certificate
// renewals at the proxy, as a --proxy-credential=certificate install has.
func rotatingCertKubeconfig(t *testing.T, strategy proxyStrategy) string {
	t.Helper()
	alice := testbed.DexUsers[0]
	dir := t.TempDir()
	current := filepath.Join(dir, "credential.json")
	start := time.Now()
	// Issued here, on the test's goroutine; the switcher only renames. Each
	// is in place a few seconds before the one before it expires.
	const minutes = 6
	for i := range minutes {
		cred := signerCredential(t, ourInstall, alice.Email, "", alice.Groups)
		raw, err := json.Marshal(map[string]any{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
			"status": map[string]any{"clientCertificateData": string(cred.Cert), "clientKeyData": string(cred.Key),
				"expirationTimestamp": start.Add(time.Duration(i+1)*time.Minute + 5*time.Second).UTC().Format(time.RFC3339)}})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("credential-%d.json", i)), raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	place := func(i int) error {
		return os.Link(filepath.Join(dir, fmt.Sprintf("credential-%d.json", i)), current+".new") //nolint:gosec // the test's own files
	}
	swap := func(i int) {
		_ = os.Remove(current + ".new")
		if place(i) == nil {
			_ = os.Rename(current+".new", current)
		}
	}
	swap(0)
	stop, done := make(chan struct{}), make(chan struct{})
	// Joined before TempDir's own cleanup (registered earlier, run later).
	t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		for i := 1; i < minutes; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Until(start.Add(time.Duration(i) * time.Minute))):
				swap(i)
			}
		}
	}()
	plugin := filepath.Join(dir, "plugin")
	if strings.ContainsAny(current, "'\n") {
		t.Fatalf("path %q cannot be quoted for sh", current)
	}
	if err := os.WriteFile(plugin, []byte(fmt.Sprintf("#!/bin/sh\ncat '%s'\n", current)), 0o700); err != nil { //nolint:gosec // G306: an executable for this test's user only
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: strategy.Endpoint, CertificateAuthorityData: strategy.CA}
	cfg.AuthInfos["alice"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1",
		Command: plugin, InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "alice"}
	cfg.CurrentContext = "proxy"
	kc := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}
	return kc
}

// startExpiredRenewal logs alice in through kubectl now and returns the
// check to run once the credential has expired (a minute or more later):
// kubectl then renews it, and its stderr stays empty.
func startExpiredRenewal(t *testing.T, pinniped string) func(t *testing.T) {
	t.Helper()
	alice := testbed.DexUsers[0]
	kc := userKubeconfig(t, pinniped, "--oidc-flow=password", "--credential-cache=file")
	dir := t.TempDir()
	raw, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "credentials.log")
	entry := raw.AuthInfos[raw.Contexts[raw.CurrentContext].AuthInfo].Exec
	entry.Command = countingPlugin(t, dir, entry.Command, log)
	if err := clientcmd.WriteToFile(*raw, kc); err != nil {
		t.Fatal(err)
	}
	env := []string{"KUBECONFIG=" + kc, "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"PINNIPED_USERNAME=" + alice.Email, "PINNIPED_PASSWORD=" + alice.Password}
	call := func(t *testing.T) (string, string) {
		t.Helper()
		cmd := exec.CommandContext(context.Background(), "kubectl", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
		cmd.Env = append(BedEnv(), env...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("kubectl auth whoami: %v\n%s", err, stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	if who, _ := call(t); who != alice.Email {
		t.Fatalf("the first login: kubectl says %q", who)
	}
	first := time.Now()
	return func(t *testing.T) {
		// The agent of this test issues 1-minute credentials.
		if wait := time.Until(first.Add(70 * time.Second)); wait > 0 {
			time.Sleep(wait)
		}
		who, stderr := call(t)
		if who != alice.Email {
			t.Fatalf("after the expiry: kubectl says %q", who)
		}
		if n := len(credentialsSeen(log)); n < 2 {
			t.Fatalf("%d credentials: the second call renewed nothing, so it proves nothing", n)
		}
		if stderr != "" {
			t.Errorf("a renewal of an expired credential that needs nobody wrote to kubectl's stderr:\n%s", stderr)
		}
	}
}

// startLocalProxy runs `pinniped proxy` for kubeconfig kc as alice (her
// password login unattended, its own credential cache) until the test
// ends, and returns the kubeconfig it writes and its state directory.
func startLocalProxy(t *testing.T, pinniped, kc string, flags ...string) (string, string) {
	t.Helper()
	return startLocalProxyUntil(t, pinniped, kc, func(c state.Context) bool { return c.State == "ready" }, flags...)
}

// startLocalProxyUntil is startLocalProxy, waiting until settled holds for
// every context instead of until each has a credential.
func startLocalProxyUntil(t *testing.T, pinniped, kc string, settled func(state.Context) bool, flags ...string) (string, string) {
	t.Helper()
	alice := testbed.DexUsers[0]
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "proxy")
	out := filepath.Join(stateDir, "kubeconfig")
	logPath := filepath.Join(dir, "proxy.log")
	logFile, err := os.Create(logPath) //nolint:gosec // G304: the test's own file
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(context.Background(), pinniped, append([]string{"proxy", "--kubeconfig", kc, "--state-dir", stateDir, "--listen", "127.0.0.1:0"}, flags...)...)
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"PINNIPED_USERNAME="+alice.Email, "PINNIPED_PASSWORD="+alice.Password)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("pinniped proxy ended with %v after Ctrl-C", err)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("pinniped proxy did not stop within 30 s of Ctrl-C")
		}
		_ = logFile.Close()
		if b, err := os.ReadFile(logPath); err == nil { //nolint:gosec // G304: the test's own file
			t.Logf("pinniped proxy said:\n%s", b)
		}
	})
	Eventually(t, 90*time.Second, "pinniped proxy has a credential for every context", func(context.Context) error {
		select {
		case err := <-done:
			return fmt.Errorf("pinniped proxy exited: %w", err)
		default:
		}
		st, err := state.Read(stateDir)
		if err != nil {
			return fmt.Errorf("no state yet: %w", err)
		}
		if st == nil || len(st.Contexts) == 0 {
			return errors.New("no context in the state yet")
		}
		for _, c := range st.Contexts {
			if !settled(c) {
				return fmt.Errorf("context %s is %s %s", c.Context, c.State, c.Problem)
			}
		}
		if _, err := os.Stat(out); err != nil {
			return err
		}
		return nil
	})
	return out, stateDir
}

// runLongClient runs longclient as alice with kubeconfig kc until her exec
// plugin has handed client-go renewals new credentials (and a little more,
// so a cut at the last renewal shows), and returns its report. It fails
// the test if the renewals do not come within a few minutes.
//
// renewed, when set, counts renewals instead of the exec plugin's distinct
// credentials (behind pinniped proxy, client-go's credential never changes).
func runLongClient(t *testing.T, kc string, renewals int, renewed func() int) *longclient.Report {
	t.Helper()
	alice := testbed.DexUsers[0]
	raw, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	exec := raw.AuthInfos[raw.Contexts[raw.CurrentContext].AuthInfo].Exec
	if exec == nil {
		t.Fatalf("the kubeconfig's user runs no exec plugin")
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "credentials.log")
	exec.Command = countingPlugin(t, dir, exec.Command, log)
	exec.Env = append(exec.Env,
		clientcmdapi.ExecEnvVar{Name: "XDG_CONFIG_HOME", Value: filepath.Join(dir, "config")},
		clientcmdapi.ExecEnvVar{Name: "PINNIPED_USERNAME", Value: alice.Email},
		clientcmdapi.ExecEnvVar{Name: "PINNIPED_PASSWORD", Value: alice.Password})
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}

	// A renewal takes one credential lifetime (1 minute); the margin covers
	// the first login and a slow machine.
	deadline := time.Duration(renewals)*time.Minute + 3*time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	timedOut := make(chan struct{})
	go func() {
		start := time.Now()
		for ctx.Err() == nil {
			n := len(credentialsSeen(log)) - 1
			if renewed != nil {
				n = renewed()
			}
			if n >= renewals {
				// A cut comes right after its renewal, or, if it leaves a
				// stream silent, within longclient's stall time (20 s).
				select {
				case <-ctx.Done():
				case <-time.After(25 * time.Second):
				}
				cancel()
				return
			}
			if time.Since(start) > deadline {
				close(timedOut)
				cancel()
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	rep, err := longclient.Run(ctx, cfg, longclient.Options{Namespace: longLivedNS, Pod: "ticker", Port: 8080, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	seen := credentialsSeen(log)
	var at []string
	for _, s := range seen {
		at = append(at, "+"+s.Sub(rep.Start).Round(100*time.Millisecond).String())
	}
	n := max(len(seen)-1, 0)
	if renewed != nil {
		n = renewed()
	}
	t.Logf("%d renewals (credentials handed to client-go at %s); %s", n, strings.Join(at, ", "), rep.Summary())
	select {
	case <-timedOut:
		t.Fatalf("%d renewals in %s, want %d: is the agent issuing 1-minute credentials?", n, deadline, renewals)
	default:
	}
	for _, s := range []string{longclient.StreamWatch, longclient.StreamLogs, longclient.StreamExecWS, longclient.StreamExecSPDY,
		longclient.StreamForwardWS, longclient.StreamForwardSPDY, longclient.StreamGet} {
		if rep.Progress[s] == 0 {
			t.Errorf("%s never made progress: the run shows nothing about it", s)
		}
	}
	return rep
}

// countingPlugin writes a wrapper around the exec plugin command that
// appends a line to log for each credential it hands client-go: the time and
// a hash of what the plugin printed, never the credential. Distinct hashes
// are distinct credentials, however the plugin caches; this counts what
// client-go received, which is what decides whether it closes connections.
func countingPlugin(t *testing.T, dir, command, log string) string {
	t.Helper()
	for _, p := range []string{command, log} {
		if strings.ContainsAny(p, "'\n") {
			t.Fatalf("path %q cannot be quoted for sh", p)
		}
	}
	script := fmt.Sprintf(`#!/bin/sh
out=$('%s' "$@") || exit
printf '%%s %%s\n' "$(date +%%s.%%N)" "$(printf '%%s' "$out" | sha256sum | cut -c1-16)" >> '%s'
printf '%%s\n' "$out"
`, command, log)
	wrapper := filepath.Join(dir, "counting-plugin")
	if err := os.WriteFile(wrapper, []byte(script), 0o700); err != nil { //nolint:gosec // G306: an executable for this test's user only
		t.Fatal(err)
	}
	return wrapper
}

// credentialsSeen reads countingPlugin's log: when each distinct credential
// was first handed over, in order.
func credentialsSeen(log string) []time.Time {
	f, err := os.Open(log) //nolint:gosec // G304: the test's own file
	if err != nil {
		return nil
	}
	defer f.Close()
	var at []time.Time
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		when, hash, ok := strings.Cut(sc.Text(), " ")
		if !ok || seen[hash] {
			continue
		}
		seen[hash] = true
		sec, err := strconv.ParseFloat(when, 64)
		if err != nil {
			continue
		}
		at = append(at, time.Unix(0, int64(sec*1e9)))
	}
	return at
}
