//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// stopDaemon stops one of the bed's daemons for the rest of the test (a
// grace of 0 kills it outright) and starts it again when the test ends,
// waiting until ready says it serves, so a failing test never leaves the
// bed without it.
func stopDaemon(t *testing.T, name string, grace time.Duration, ready func(context.Context) error) (start func()) {
	t.Helper()
	if err := Bed.Stop(name, grace); err != nil {
		t.Fatal(err)
	}
	started := false
	start = func() {
		t.Helper()
		if !started {
			if err := Bed.Start(name); err != nil {
				t.Fatal(err)
			}
			Eventually(t, 60*time.Second, name+" serves again", ready)
			started = true
		}
		// And whatever the fault took down with it (again when the test
		// ends: some exit only a while after).
		if revived, err := Bed.Revive(); err != nil {
			t.Fatal(err)
		} else if len(revived) > 0 {
			t.Logf("bed daemons that exited while %s was away, started again: %v", name, revived)
		}
	}
	t.Cleanup(start)
	return start
}

// serves: the issuer (the bed's Dex or test Supervisor) answers its
// discovery document.
func serves(issuer string) func(context.Context) error {
	return func(ctx context.Context) error {
		client, err := Bed.DexHTTPClient()
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, issuer+"/.well-known/openid-configuration", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return &httpStatusError{resp.StatusCode}
		}
		return nil
	}
}

type httpStatusError struct{ code int }

func (e *httpStatusError) Error() string { return http.StatusText(e.code) }

// cacheFiles are the files a login keeps under a configuration directory
// (lock files aside), each with a digest of its content.
func cacheFiles(t *testing.T, config string) map[string]string {
	t.Helper()
	return cacheTree(t, filepath.Join(config, "pinniped"))
}

// cacheTree is cacheFiles of a copy of a configuration directory's pinniped
// folder.
func cacheTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(p, string(filepath.Separator)+"locks"+string(filepath.Separator)) {
			return err
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(raw)
		out[strings.TrimPrefix(p, root)] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return out
}

// TestIdentityProviderDown: with Dex stopped, the credentials kubectl
// already has cached keep working; a login that needs Dex fails with a
// message naming Dex's issuer and the cause, and caches nothing; what was
// cached stays byte for byte as it was; once Dex is back, the next call
// logs in.
func TestIdentityProviderDown(t *testing.T) {
	pinniped := installAgent(t)
	alice := testbed.DexUsers[0]
	kc := userKubeconfig(t, pinniped, "--oidc-flow=password")
	env := func(config string) []string {
		// No session bus: the caches are files, which the test can read.
		return []string{"KUBECONFIG=" + kc, "XDG_CONFIG_HOME=" + config, "DBUS_SESSION_BUS_ADDRESS=", "XDG_RUNTIME_DIR=",
			"PINNIPED_USERNAME=" + alice.Email, "PINNIPED_PASSWORD=" + alice.Password}
	}
	loggedIn, fresh := t.TempDir(), t.TempDir()
	if got, stderr, err := whoami(t, env(loggedIn)); err != nil || got != alice.Email {
		t.Fatalf("whoami: %q (%v)\n%s", got, err, stderr)
	}
	before := cacheFiles(t, loggedIn)
	if len(before) == 0 {
		t.Fatal("the login cached nothing")
	}

	startDex := stopDaemon(t, "dex", 5*time.Second, serves(Bed.Config().DexIssuer()))
	for i := range 3 {
		if got, stderr, err := whoami(t, env(loggedIn)); err != nil || got != alice.Email {
			t.Fatalf("call %d with Dex down and a cached credential: %q (%v)\n%s", i+1, got, err, stderr)
		}
	}
	_, stderr, err := whoami(t, env(fresh))
	if err == nil {
		t.Fatal("a login succeeded with Dex down")
	}
	if !strings.Contains(stderr, Bed.Config().DexIssuer()) || !strings.Contains(stderr, "connection refused") {
		t.Fatalf("the failed login should name the issuer and the cause:\n%s", stderr)
	}
	if strings.Contains(stderr, alice.Password) {
		t.Fatalf("the password was shown:\n%s", stderr)
	}
	if left := cacheFiles(t, fresh); len(left) != 0 {
		t.Fatalf("a failed login cached %v", slices.Collect(maps.Keys(left)))
	}
	if after := cacheFiles(t, loggedIn); !maps.Equal(before, after) {
		t.Fatalf("the cache changed while Dex was down:\nbefore %v\nafter  %v", before, after)
	}

	startDex()
	if got, stderr, err := whoami(t, env(fresh)); err != nil || got != alice.Email {
		t.Fatalf("whoami once Dex is back: %q (%v)\n%s", got, err, stderr)
	}
}

// TestUnwritableCache: when the cache's disk is full, or read-only, at the
// moment a login would write a credential, kubectl still gets its
// credential, stderr says the cache could not be written, and what was
// cached before is left whole (no file changed, none half-written). The
// cache lives on a small tmpfs in a mount namespace of the test's own.
func TestUnwritableCache(t *testing.T) {
	pinniped := installAgent(t)
	alice := testbed.DexUsers[0]
	kc := userKubeconfig(t, pinniped, "--oidc-flow=password")
	raw, err := os.ReadFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	// The same login for a cluster credential of another key: the session
	// is found, the exchange runs, and its credential must be written.
	other := filepath.Join(t.TempDir(), "other.kubeconfig")
	if err := os.WriteFile(other, []byte(reencodeCABundle(t, string(raw))), 0o600); err != nil {
		t.Fatal(err)
	}
	const script = `set -e
mount -t tmpfs -o size=1m,mode=0700 tmpfs "$CFG"
KUBECONFIG="$KC1" kubectl auth whoami -o jsonpath='{.status.userInfo.username}' > "$OUT/first" 2> "$OUT/first.err"
cp -a "$CFG/pinniped" "$OUT/before"
case "$MODE" in
full) dd if=/dev/zero of="$CFG/fill" bs=4096 2>/dev/null || true ;;
read-only) mount -o remount,ro "$CFG" ;;
esac
rc=0
KUBECONFIG="$KC2" kubectl auth whoami -o jsonpath='{.status.userInfo.username}' > "$OUT/second" 2> "$OUT/second.err" || rc=$?
echo $rc > "$OUT/second.rc"
cp -a "$CFG/pinniped" "$OUT/after"
`
	for _, mode := range []string{"full", "read-only"} {
		t.Run(mode, func(t *testing.T) {
			cfg, out := t.TempDir(), t.TempDir()
			cmd := exec.CommandContext(context.Background(), "unshare", "--mount", "sh", "-c", script)
			cmd.Env = append(BedEnv(), "CFG="+cfg, "OUT="+out, "MODE="+mode, "KC1="+kc, "KC2="+other,
				"XDG_CONFIG_HOME="+cfg, "DBUS_SESSION_BUS_ADDRESS=", "XDG_RUNTIME_DIR=",
				"PINNIPED_USERNAME="+alice.Email, "PINNIPED_PASSWORD="+alice.Password)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, b)
			}
			read := func(name string) string {
				b, _ := os.ReadFile(filepath.Join(out, name))
				return strings.TrimSpace(string(b))
			}
			if read("first") != alice.Email {
				t.Fatalf("the first login: %q\n%s", read("first"), read("first.err"))
			}
			if read("second.rc") != "0" || read("second") != alice.Email {
				t.Fatalf("with the cache %s, kubectl got %q (exit %s)\n%s", mode, read("second"), read("second.rc"), read("second.err"))
			}
			if !strings.Contains(read("second.err"), "could not cache the credential") {
				t.Errorf("no warning that the cache could not be written:\n%s", read("second.err"))
			}
			before, after := cacheTree(t, filepath.Join(out, "before")), cacheTree(t, filepath.Join(out, "after"))
			if len(before) == 0 || !maps.Equal(before, after) {
				t.Fatalf("the cache changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

// dialFailure is a client's connection failing below HTTP: the address and
// port it dialled.
var dialFailure = regexp.MustCompile(`dial tcp ([0-9.]+):([0-9]+): (connect: |i/o timeout)`)

// netDiagnosis says what the bed's network held for ip:port just after a
// connection to it failed: the conntrack entries towards it (and where
// their replies come from), the NAT rules that match it, and the neighbours
// the node could not reach. Best effort, bounded: a test's log, not a dump.
func netDiagnosis(ip, port string) string {
	var b strings.Builder
	b.WriteString("    the bed's network just after:")
	show := func(what string, lines []string) {
		fmt.Fprintf(&b, "\n    %s (%d):", what, len(lines))
		for _, l := range lines[:min(len(lines), 12)] {
			b.WriteString("\n      " + l)
		}
	}
	run := func(name string, args ...string) []string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.WaitDelay = time.Second
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return []string{fmt.Sprintf("(%s: %v: %s)", name, err, strings.TrimSpace(stderr.String()))}
		}
		var lines []string
		for _, l := range strings.Split(string(out), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
		return lines
	}
	show("conntrack -L -d "+ip+" --dport "+port, run("conntrack", "-L", "-p", "tcp", "-d", ip, "--dport", port))
	// The address's own rules first (its Service's chains), then where
	// the NAT table sends connections at all.
	var own, dnat []string
	for _, l := range run("iptables-save", "-t", "nat") {
		switch {
		case strings.Contains(l, ip+"/32"):
			own = append(own, l)
		case strings.Contains(l, "-j DNAT"):
			dnat = append(dnat, l)
		}
	}
	show("NAT rules for it, then every DNAT", append(own, dnat...))
	var neigh []string
	for _, l := range run("ip", "neigh", "show") {
		if strings.Contains(l, "FAILED") || strings.Contains(l, "INCOMPLETE") {
			neigh = append(neigh, l)
		}
	}
	show("neighbours not reached", neigh)
	return b.String()
}

// kubectlLoadResult counts what a load sent and what failed, with the first
// failures' stderr.
type kubectlLoadResult struct {
	sent, failed atomic.Int64
	diagnosed    atomic.Int32 // failures given a netDiagnosis: the first few
	mu           sync.Mutex
	failures     []loadFailure
}

// loadFailure is one failed kubectl call: when it started and ended, and
// its stderr.
type loadFailure struct {
	start, at time.Time
	stderr    string
}

func (f loadFailure) String() string { return f.at.Format("15:04:05.000") + ": " + f.stderr }

// kubectlLoad runs workers that each call kubectl (as a user whose every
// call exchanges a token at the agent) in a loop until stop is closed.
func kubectlLoad(t *testing.T, workers int, env []string, stop <-chan struct{}) (*kubectlLoadResult, *sync.WaitGroup) {
	t.Helper()
	res := &kubectlLoadResult{}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				res.sent.Add(1)
				start := time.Now()
				if got, stderr, err := whoami(t, env); err != nil || got == "" {
					res.failed.Add(1)
					f := loadFailure{start, time.Now(), strings.TrimSpace(stderr)}
					// What the node's network did with it, read at once:
					// a failure at this layer is rare, and gone a moment later.
					if m := dialFailure.FindStringSubmatch(stderr); m != nil && res.diagnosed.Add(1) <= 3 {
						f.stderr += "\n" + netDiagnosis(m[1], m[2])
					}
					res.mu.Lock()
					res.failures = append(res.failures, f)
					res.mu.Unlock()
				}
			}
		}()
	}
	return res, &wg
}

// tcrResult counts a TokenCredentialRequest load: requests sent, retried
// (after a connection error, 502, 503 or 504, as the CLI retries) and
// failed for good.
type tcrResult struct {
	sent, retried, failed atomic.Int64
	mu                    sync.Mutex
	failures              []string
	// tokenErrors are the load's failures to get a new ID token from
	// Dex: the bed's, not the exchange's.
	tokenErrors []string
}

// tcrLoad posts TokenCredentialRequests for alice through kube-apiserver
// from workers goroutines until stop is closed, each on a connection of
// its own, retrying up to maxRetries times what may pass a moment later;
// one that still fails then failed for good.
func tcrLoad(t *testing.T, workers, maxRetries int, firstWait time.Duration, stop <-chan struct{}) (*tcrResult, *sync.WaitGroup) {
	t.Helper()
	url, first, pool := exchangeRequest(t)
	var body atomic.Pointer[[]byte]
	body.Store(&first)
	tlsConfig := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if Bed.Config().AnonymousHealthOnly() {
		// The API server lets no anonymous request through to the
		// exchange: it is made as the bed's admin, on the same path
		// through kube-apiserver to the aggregated API.
		rc, err := Bed.RESTConfig()
		if err != nil {
			t.Fatal(err)
		}
		if tlsConfig, err = rest.TLSConfigFor(rc); err != nil || tlsConfig == nil {
			t.Fatalf("the admin's TLS settings: %v", err)
		}
		tlsConfig.MinVersion = tls.VersionTLS12
	}
	// once sends one request; a 201 counts only when it holds a
	// credential (a refusal is a 201 too, with a message).
	once := func(c *http.Client) (int, error) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(*body.Load()))
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		defer func() { _ = resp.Body.Close() }()
		var out struct {
			Status struct {
				Credential *json.RawMessage `json:"credential"`
				Message    *string          `json:"message"`
			} `json:"status"`
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil && resp.StatusCode == http.StatusCreated {
			return resp.StatusCode, err
		}
		if resp.StatusCode == http.StatusCreated && out.Status.Credential == nil {
			msg := ""
			if out.Status.Message != nil {
				msg = *out.Status.Message
			}
			return resp.StatusCode, fmt.Errorf("refused: %s", msg)
		}
		return resp.StatusCode, nil
	}
	res := &tcrResult{}
	fail := func(status int, err error) {
		res.failed.Add(1)
		res.mu.Lock()
		if len(res.failures) < 5 {
			res.failures = append(res.failures, fmt.Sprintf("%s: HTTP %d %v", time.Now().Format("15:04:05.000"), status, err))
		}
		res.mu.Unlock()
	}
	var wg sync.WaitGroup
	// The bed's Dex ID tokens live 10 minutes, and a load may run longer
	// (make bench-soak): a new token every 3 minutes, or 10 seconds after
	// a failed try.
	_, conf := DexOAuth2(t, context.Background(), "")
	dexCtx, cancelDex := context.WithCancel(DexContext(t, context.Background()))
	alice := testbed.DexUsers[0]
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-stop
		cancelDex()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		wait := 3 * time.Minute
		for {
			select {
			case <-stop:
				return
			case <-time.After(wait):
			}
			tok, err := conf.PasswordCredentialsToken(dexCtx, alice.Email, alice.Password)
			idToken := ""
			if err == nil {
				idToken, _ = tok.Extra("id_token").(string)
				if idToken == "" {
					err = errors.New("Dex's password grant gave no ID token")
				}
			}
			if err != nil {
				select {
				case <-stop:
					return
				default:
				}
				res.mu.Lock()
				res.tokenErrors = append(res.tokenErrors, fmt.Sprintf("%s: a new ID token from Dex: %v", time.Now().Format("15:04:05.000"), err))
				res.mu.Unlock()
				wait = 10 * time.Second
				continue
			}
			wait = 3 * time.Minute
			b := exchangeBody(idToken)
			body.Store(&b)
		}
	}()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig.Clone()}}
			for {
				select {
				case <-stop:
					return
				default:
				}
				res.sent.Add(1)
				status, err := once(c)
				// A refusal (an answer meant) is not retried, as the CLI does not.
				for try := 0; try < maxRetries && ((err != nil && status == 0) || status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout); try++ {
					res.retried.Add(1)
					time.Sleep(firstWait << try)
					status, err = once(c)
				}
				if err != nil || status != http.StatusCreated {
					fail(status, err)
				}
			}
		}()
	}
	return res, &wg
}

// agentPods are the agent's pods: name, UID and restart count.
type agentPod struct {
	name, uid string
	restarts  int
}

func agentPods(t *testing.T) []agentPod {
	t.Helper()
	out := Kubectl(t, "-n", "pinniped", "get", "pods", "-l", "app.kubernetes.io/name=pinniped-agent,app.kubernetes.io/component=agent",
		"-o", `jsonpath={range .items[*]}{.metadata.name} {.metadata.uid} {.status.containerStatuses[0].restartCount}{"\n"}{end}`)
	var pods []agentPod
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		n, _ := strconv.Atoi(f[2])
		pods = append(pods, agentPod{f[0], f[1], n})
	}
	return pods
}

// killAgent sends SIGKILL to the agent process of one pod: found on the
// host by its cgroup, which names the pod's UID.
func killAgent(t *testing.T, pod agentPod) {
	t.Helper()
	uid := strings.ReplaceAll(pod.uid, "-", "_")
	procs, _ := filepath.Glob("/proc/[0-9]*/cgroup")
	for _, cg := range procs {
		raw, err := os.ReadFile(cg)
		if err != nil || (!strings.Contains(string(raw), uid) && !strings.Contains(string(raw), pod.uid)) {
			continue
		}
		dir := filepath.Dir(cg)
		comm, _ := os.ReadFile(filepath.Join(dir, "comm"))
		if strings.TrimSpace(string(comm)) != "pinniped-agent" {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(dir))
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill %d (%s): %v", pid, pod.name, err)
		}
		return
	}
	t.Fatalf("no pinniped-agent process of pod %s (uid %s) on this host", pod.name, pod.uid)
}

// TestAgentReplicaKilledUnderLoad: while users' kubectl calls each
// exchange a token, and a TokenCredentialRequest load runs beside them,
// each agent replica in turn is killed with SIGKILL; no kubectl call
// fails, and no exchange fails for good (clients may retry what the
// aggregator could not answer for a moment, as the CLI does).
func TestAgentReplicaKilledUnderLoad(t *testing.T) {
	pinniped := installAgent(t)
	env := exchangingUser(t, pinniped)
	pods := agentPods(t)
	if len(pods) != 2 {
		t.Fatalf("want the agent's 2 replicas, have %v", pods)
	}
	var kills []time.Time
	// Where kubectl talks to the impersonation proxy (the managed
	// profile), a call can reach a replica killed a moment ago, before its
	// endpoint is gone: the connection is refused, and kubectl does not
	// retry a refused connection. And a call in flight on the replica
	// killed is reset: client-go retries a GET so, but this load's call
	// (auth whoami) is a POST, which no client retries. Against an API
	// server replica killed so, both fail alike. Only those are excused,
	// and only just after a kill.
	// Only kubectl's own request may be excused, never the plugin's
	// exchange ("getting credentials"), which retries and must not fail.
	// kubectl prints a failed POST as "Unable to connect to the server:"
	// and the transport's error, without the URL.
	// A write to a socket the killed process's kernel reset fails with
	// EPIPE ("broken pipe") or ECONNRESET, a read with ECONNRESET or EOF.
	inFlight := regexp.MustCompile(`(?m)^Unable to connect to the server: (EOF|unexpected EOF|(read|write) tcp \S+: (read|write): (connection reset by peer|broken pipe)|http2: client connection lost)$`)
	excusedPerKill := map[int]int{}
	excused := func(f loadFailure) string {
		if Bed.Config().Profile != testbed.ProfileManaged || strings.Contains(f.stderr, "getting credentials") {
			return ""
		}
		for i, k := range kills {
			if !f.at.After(k) || !f.at.Before(k.Add(5*time.Second)) {
				continue
			}
			switch {
			// A refused call was never in flight: it may have started
			// before the kill (kubectl runs the plugin's exchange first)
			// and dialled after it.
			case strings.Contains(f.stderr, "was refused"):
				return "refused by the proxy's address within 5 s of a kill, before the killed replica's endpoint was gone"
			case inFlight.MatchString(f.stderr) && f.start.Before(k) && excusedPerKill[i] < 2:
				// The connection ends as the kernel closes a killed
				// process's sockets: a reset when unread bytes were
				// waiting, else EOF. A call that started after the kill
				// cannot be cut so, and with two workers at most two
				// calls were in flight.
				excusedPerKill[i]++
				return "in flight on the replica killed (a POST, which kubectl does not retry), ended within 5 s of the kill"
			}
		}
		return ""
	}
	// Where the proxy serves (the managed profile), a watch through it is
	// cut when its replica dies; kubectl wait watches with client-go's
	// informer machinery, which re-lists and watches again as it does
	// when an API server replica goes.
	managed := Bed.Config().Profile == testbed.ProfileManaged
	var watchOut bytes.Buffer
	watchDone := make(chan error, 1)
	stopWatch := func() {}
	if managed {
		Kubectl(t, "-n", "default", "create", "configmap", "e2e-watched", "--from-literal=k=before")
		t.Cleanup(func() { _, _ = RunE(nil, "kubectl", "-n", "default", "delete", "configmap", "e2e-watched") })
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		stopWatch = cancel
		t.Cleanup(cancel)
		watch := exec.CommandContext(ctx, "kubectl", "-n", "default", "wait", "configmap/e2e-watched", "--for=jsonpath={.data.k}=after", "--timeout=5m", "-v=4")
		watch.Env = append(BedEnv(), env...)
		watch.Stdout, watch.Stderr = &watchOut, &watchOut
		if err := watch.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { watchDone <- watch.Wait() }()
	}
	underLoad(t, env, "both replicas killed in turn", excused, func() {
		for _, pod := range pods {
			kills = append(kills, time.Now())
			killAgent(t, pod)
			killed := time.Now()
			Eventually(t, 90*time.Second, pod.name+" restarted and ready", func(context.Context) error {
				for _, p := range agentPods(t) {
					if p.name == pod.name && p.restarts > pod.restarts {
						_, err := RunE(nil, "kubectl", "-n", "pinniped", "wait", "--for=condition=Ready", "pod/"+p.name, "--timeout=1s")
						return err
					}
				}
				return errors.New("not restarted yet")
			})
			t.Logf("%s: killed, back and ready after %s", pod.name, time.Since(killed).Round(100*time.Millisecond))
			time.Sleep(5 * time.Second)
		}
	})
	if !managed {
		return
	}
	select {
	case err := <-watchDone:
		t.Fatalf("kubectl's watch through the proxy ended before the change it waits for: %v\n%s", err, watchOut.String())
	default:
	}
	Kubectl(t, "-n", "default", "patch", "configmap", "e2e-watched", "-p", `{"data":{"k":"after"}}`)
	select {
	case err := <-watchDone:
		if err != nil {
			t.Fatalf("kubectl's watch through the proxy: %v\n%s", err, watchOut.String())
		}
		var watchLines []string
		for _, l := range strings.Split(watchOut.String(), "\n") {
			if strings.Contains(strings.ToLower(l), "watch") {
				watchLines = append(watchLines, l)
			}
		}
		t.Logf("a kubectl watch through the proxy outlived both replicas' kills and saw the change; what its log says of watches:\n%s",
			strings.Join(watchLines[max(0, len(watchLines)-8):], "\n"))
	case <-time.After(time.Minute):
		stopWatch()
		if err := <-watchDone; err != nil { // its output is complete
			t.Logf("kubectl wait, stopped: %v", err)
		}
		t.Fatalf("kubectl's watch through the proxy missed the change made after the kills:\n%s", watchOut.String())
	}
}

// TestUpgradeAndRollbackUnderLoad: `pinniped install` of another build
// of the agent over the running one, then of the first one again, while
// users log in: no kubectl call fails and no exchange fails for good
// (surge-only rollouts, readiness that means "can serve an exchange", a
// PodDisruptionBudget).
func TestUpgradeAndRollbackUnderLoad(t *testing.T) {
	pinniped := installAgent(t)
	env := exchangingUser(t, pinniped)
	first, next := AgentImage(t), AgentImageVersion(t, "v99.0.0-e2e-next")
	image := func() string {
		return Kubectl(t, "-n", "pinniped", "get", "deployment", "pinniped-agent", "-o", "jsonpath={.spec.template.spec.containers[0].image}")
	}
	// The running release's CRD as an older release had it: without a
	// field added since (nor the validation rule that names it). The
	// upgrade must bring both.
	const crd = "jwtauthenticators.authentication.concierge.pinniped.dev"
	Kubectl(t, "patch", "crd", crd, "--type=json", "-p",
		`[{"op":"remove","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/x-kubernetes-validations"},`+
			`{"op":"remove","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/tls/properties/certificateAuthorityDataSource"}]`)
	crdHasField := func() bool {
		return Kubectl(t, "get", "crd", crd, "-o",
			"jsonpath={.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.tls.properties.certificateAuthorityDataSource.type}") == "object" &&
			strings.Contains(Kubectl(t, "get", "crd", crd, "-o",
				"jsonpath={.spec.versions[0].schema.openAPIV3Schema.properties.spec.x-kubernetes-validations[*].rule}"), "certificateAuthorityDataSource")
	}
	if crdHasField() {
		t.Fatal("the CRD kept the field the test removed")
	}
	underRollout(t, env, "an upgrade and a rollback", func() {
		for _, img := range []string{next, first} {
			began := time.Now()
			args := installArgs(t)
			for i, a := range args {
				if strings.HasPrefix(a, "--image=") {
					args[i] = "--image=" + img
				}
			}
			Run(t, nil, pinniped, args...)
			Run(t, nil, "kubectl", "-n", "pinniped", "rollout", "status", "deployment/pinniped-agent", "--timeout=3m")
			if got := image(); got != img {
				t.Fatalf("the Deployment runs %s, want %s", got, img)
			}
			if !crdHasField() {
				t.Errorf("after installing %s the JWTAuthenticator CRD still lacks tls.certificateAuthorityDataSource: CRD changes were not applied", img)
			}
			t.Logf("rolled out %s in %s", img, time.Since(began).Round(100*time.Millisecond))
			time.Sleep(5 * time.Second)
		}
	})

	// The control: the same loads, held to the same rules, over a rollout
	// that stops every replica before it starts new ones (Recreate) must
	// fail them; if they passed, the check above could catch nothing.
	// (The installation is removed after the test.)
	t.Run("control: a rollout with no replica serving fails the check", func(t *testing.T) {
		Kubectl(t, "-n", "pinniped", "patch", "deployment", "pinniped-agent", "--type=merge", "-p", `{"spec":{"strategy":{"type":"Recreate","rollingUpdate":null}}}`)
		o := runUnderLoad(t, env, "a Recreate rollout", rolloutRules, func() {
			Kubectl(t, "-n", "pinniped", "rollout", "restart", "deployment/pinniped-agent")
			Run(t, nil, "kubectl", "-n", "pinniped", "rollout", "status", "deployment/pinniped-agent", "--timeout=3m")
			time.Sleep(5 * time.Second)
		})
		// Failed calls, not a load too small: that would fail the check
		// for another reason than the one it is about.
		if o.tcrFailed == 0 && len(o.kubectlFailed) == 0 {
			t.Errorf("no call failed over a rollout that stopped every replica: the loads cannot catch a disruptive rollout")
		} else {
			t.Logf("as it must, the check failed over the Recreate rollout:\n%s", strings.Join(o.failures(), "\n"))
		}
	})
}

// exchangingUser is alice's environment for kubectl with a kubeconfig
// whose every call exchanges a token at the agent (no cluster credential
// is cached; the session is), logged in once.
func exchangingUser(t *testing.T, pinniped string) []string {
	t.Helper()
	alice := testbed.DexUsers[0]
	proxyFirst(t)
	kc := userKubeconfig(t, pinniped, "--oidc-flow=password")
	cfg, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	user := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
	user.Exec.Args = append(user.Exec.Args, "--credential-cache=")
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}
	env := []string{"KUBECONFIG=" + kc, "XDG_CONFIG_HOME=" + t.TempDir(), "DBUS_SESSION_BUS_ADDRESS=", "XDG_RUNTIME_DIR=",
		"PINNIPED_USERNAME=" + alice.Email, "PINNIPED_PASSWORD=" + alice.Password}
	if got, stderr, err := whoami(t, env); err != nil || got != alice.Email {
		t.Fatalf("whoami: %q (%v)\n%s", got, err, stderr)
	}
	return env
}

// proxyFirst waits, on the managed profile, until the impersonation proxy
// is advertised: get kubeconfig picks the first working strategy, and
// just after an install that may still be the slower CSR path, which
// would make a test's users talk to kube-apiserver, not the proxy.
func proxyFirst(t *testing.T) {
	t.Helper()
	if Bed.Config().Profile == testbed.ProfileManaged {
		waitProxyStrategy(t, "the impersonation proxy is advertised", proxySucceeds)
	}
}

// underLoad runs fault while kubectl calls (each an exchange, as env's
// user) and a TokenCredentialRequest load run, with 5 s of load before
// it; it logs what was sent, retried and failed, and fails the test if a
// kubectl call failed (unless excused says why it had to) or an exchange
// failed for good after five retries. For faults that kill replicas.
func underLoad(t *testing.T, env []string, what string, excused func(loadFailure) string, fault func()) {
	t.Helper()
	runUnderLoad(t, env, what, loadRules{tcrWorkers: 2, maxRetries: 5, firstWait: 200 * time.Millisecond, minTCR: 10, excused: excused}, fault).check(t)
}

// underRollout is underLoad for a planned change (an upgrade, a
// rollback), which must cost clients nothing: twice the exchange load,
// no excuse, and an exchange that needs a second retry failed.
func underRollout(t *testing.T, env []string, what string, fault func()) {
	t.Helper()
	runUnderLoad(t, env, what, rolloutRules, fault).check(t)
}

// rolloutRules are underRollout's. The one retry waits long enough for an
// endpoint change to reach kube-proxy and the aggregator on a busy
// machine: it covers a replica that went away; needing a second means
// nothing served.
var rolloutRules = loadRules{tcrWorkers: 4, maxRetries: 1, firstWait: time.Second, minTCR: 20}

// loadRules are what a run of the loads is held to.
type loadRules struct {
	tcrWorkers, maxRetries int
	firstWait              time.Duration // before the first retry; it doubles
	minTCR                 int64         // exchanges at least, or the load proved little
	excused                func(loadFailure) string
}

// loadOutcome is what one run of the loads saw.
type loadOutcome struct {
	what                 string
	table                string
	kubectlSent, tcrSent int64
	kubectlFailed        []string // not excused
	tcrFailed            int64
	tokenErrors          []string
	tcrFailures          []string
	minTCR               int64
}

// failures says what broke the rules; empty when nothing did.
func (o loadOutcome) failures() []string {
	var out []string
	if len(o.kubectlFailed) != 0 || o.kubectlSent < 10 {
		out = append(out, fmt.Sprintf("%d of %d kubectl calls failed during %s:\n%s", len(o.kubectlFailed), o.kubectlSent, o.what, strings.Join(o.kubectlFailed[:min(len(o.kubectlFailed), 5)], "\n")))
	}
	if len(o.tokenErrors) != 0 {
		out = append(out, fmt.Sprintf("the exchange load could not renew its ID token during %s (the bed's Dex, not the exchange):\n%s", o.what, strings.Join(o.tokenErrors[:min(len(o.tokenErrors), 5)], "\n")))
	}
	if o.tcrFailed != 0 || o.tcrSent < o.minTCR {
		out = append(out, fmt.Sprintf("%d of %d exchanges (at least %d wanted) failed for good during %s:\n%s", o.tcrFailed, o.tcrSent, o.minTCR, o.what, strings.Join(o.tcrFailures, "\n")))
	}
	return out
}

func (o loadOutcome) check(t *testing.T) {
	t.Helper()
	for _, f := range o.failures() {
		t.Error(f)
	}
}

// runUnderLoad runs fault under the loads and says what they saw.
func runUnderLoad(t *testing.T, env []string, what string, rules loadRules, fault func()) loadOutcome {
	t.Helper()
	stop := make(chan struct{})
	res, wg := kubectlLoad(t, 2, env, stop)
	tcr, tcrWG := tcrLoad(t, rules.tcrWorkers, rules.maxRetries, rules.firstWait, stop)
	// However the test ends, the loads end with it.
	stopLoads := sync.OnceFunc(func() { close(stop); wg.Wait(); tcrWG.Wait() })
	t.Cleanup(stopLoads)
	start := time.Now()
	time.Sleep(5 * time.Second)
	fault()
	stopLoads()
	took := time.Since(start).Round(time.Second)
	o := loadOutcome{what: what, kubectlSent: res.sent.Load(), tcrSent: tcr.sent.Load(), tcrFailed: tcr.failed.Load(), tcrFailures: tcr.failures, tokenErrors: tcr.tokenErrors, minTCR: rules.minTCR}
	excuses := map[string]int{}
	for _, f := range res.failures {
		if why := ""; rules.excused != nil {
			if why = rules.excused(f); why != "" {
				excuses[why]++
				continue
			}
		}
		o.kubectlFailed = append(o.kubectlFailed, f.String())
	}
	o.table = fmt.Sprintf("over %s, %s (an exchange retried at most %d times):\n| load | sent | retried by the client | failed |\n|---|---|---|---|\n"+
		"| kubectl through the exec plugin (an exchange each) | %d | (inside the CLI) | %d |\n| TokenCredentialRequest through kube-apiserver (%d workers) | %d | %d | %d |",
		took, what, rules.maxRetries, o.kubectlSent, len(o.kubectlFailed), rules.tcrWorkers, o.tcrSent, tcr.retried.Load(), o.tcrFailed)
	for why, n := range excuses {
		o.table += fmt.Sprintf("\n(%d more kubectl calls failed, excused: %s)", n, why)
	}
	t.Log(o.table)
	return o
}

// freshLogins is the user's environment for kubectl with kubeconfig kc,
// each call with a new cache: every call must log in and exchange at the
// agent.
func freshLogins(t *testing.T, kc string, user testbed.DexUser) func() []string {
	return func() []string {
		return []string{"KUBECONFIG=" + kc, "XDG_CONFIG_HOME=" + t.TempDir(), "DBUS_SESSION_BUS_ADDRESS=", "XDG_RUNTIME_DIR=",
			"PINNIPED_USERNAME=" + user.Email, "PINNIPED_PASSWORD=" + user.Password}
	}
}

// loginWorks: kubectl, with a fresh environment from env, is the user.
func loginWorks(t *testing.T, env func() []string, user testbed.DexUser) func(context.Context) error {
	return func(context.Context) error {
		got, stderr, err := whoami(t, env())
		if err != nil {
			return fmt.Errorf("whoami: %w: %s", err, strings.TrimSpace(stderr))
		}
		if got != user.Email {
			return fmt.Errorf("kubectl answered %q, want %q", got, user.Email)
		}
		return nil
	}
}

// apiServerReady: kube-apiserver answers /readyz.
func apiServerReady(ctx context.Context) error {
	_, err := RunE(nil, "kubectl", "get", "--raw", "/readyz", "--request-timeout=2s")
	return err
}

// TestKubeAPIServerRestarted: kube-apiserver goes away for a while and
// comes back; with no manual step the agent serves exchanges again (its
// clients reconnect, the aggregated API comes back Available, the
// signing strategy still works), and a user's kubectl logs in.
func TestKubeAPIServerRestarted(t *testing.T) {
	pinniped := installAgent(t)
	alice := testbed.DexUsers[0]
	kc := userKubeconfig(t, pinniped, "--oidc-flow=password")
	env := freshLogins(t, kc, alice)
	if err := loginWorks(t, env, alice)(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Every replica serving first: one still starting may rightly exit and
	// be restarted when the API server goes away under it.
	Run(t, nil, "kubectl", "-n", "pinniped", "rollout", "status", "deployment/pinniped-agent", "--timeout=2m")
	Run(t, nil, "kubectl", "-n", "pinniped", "wait", "--for=condition=Ready", "pod", "-l", "app.kubernetes.io/name=pinniped-agent,app.kubernetes.io/component=agent", "--timeout=2m")
	before := agentPods(t)
	start := stopDaemon(t, "kube-apiserver", 10*time.Second, apiServerReady)
	// Longer than the agent leader's renew deadline (20 s): its watches
	// fail and it loses the Lease.
	time.Sleep(25 * time.Second)
	start()
	back := time.Now()
	Eventually(t, 2*time.Minute, "a user's kubectl logs in through the agent again", loginWorks(t, env, alice))
	t.Logf("logins work again %s after kube-apiserver is back", time.Since(back).Round(100*time.Millisecond))
	if revived, err := Bed.Revive(); err != nil {
		t.Fatal(err)
	} else if len(revived) > 0 {
		t.Logf("bed daemons that exited later, started again: %v", revived)
	}
	after := agentPods(t)
	if !slices.Equal(before, after) {
		t.Errorf("the agent's pods were %v before and %v after: a serving replica should ride out an API server restart", before, after)
	}
	// The strategies are still reported working.
	if out := Kubectl(t, "get", "credentialissuers.config.concierge.pinniped.dev", "-o", "jsonpath={.items[0].status.strategies[*].status}"); !strings.Contains(out, "Success") {
		t.Errorf("CredentialIssuer strategies after the restart: %s", out)
	}
}

// TestNodeRestarted: the bed's one node loses power and comes back: every
// daemon and container killed at once, volatile state gone, everything
// started again. With no manual step the agent's pods come back, the
// signing strategy works again (on kubeadm: the cluster signing key,
// reloaded from the restarted kube-controller-manager), and a user's
// kubectl logs in.
func TestNodeRestarted(t *testing.T) {
	pinniped := installAgent(t)
	alice := testbed.DexUsers[0]
	proxyFirst(t)
	kc := userKubeconfig(t, pinniped, "--oidc-flow=password")
	env := freshLogins(t, kc, alice)
	if err := loginWorks(t, env, alice)(context.Background()); err != nil {
		t.Fatal(err)
	}
	strategies := func() string {
		out, _ := RunE(nil, "kubectl", "get", "credentialissuers.config.concierge.pinniped.dev", "-o",
			`jsonpath={range .items[0].status.strategies[*]}{.type}={.status} {end}`)
		return strings.TrimSpace(out)
	}
	// The strategy this profile's users get settled first (after an
	// install the signing key's may still be probing).
	want := "KubeClusterSigningCertificate=Success"
	if Bed.Config().Profile == testbed.ProfileManaged {
		want = "ImpersonationProxy=Success"
	}
	Eventually(t, 2*time.Minute, "the CredentialIssuer reports "+want, func(context.Context) error {
		if now := strategies(); !strings.Contains(now, want) {
			return errors.New(now)
		}
		return nil
	})
	before := strategies()
	// However the test ends, the bed serves the tests after it.
	t.Cleanup(func() {
		if _, err := Bed.Revive(); err != nil {
			t.Errorf("the bed after the reboot: %v", err)
		}
	})
	began := time.Now()
	if err := Bed.Reboot(); err != nil {
		t.Fatal(err)
	}
	t.Logf("node restarted (daemons started again in %s)", time.Since(began).Round(100*time.Millisecond))
	Eventually(t, 4*time.Minute, "a user's kubectl logs in through the agent again", loginWorks(t, env, alice))
	t.Logf("logins work again %s after the power cut", time.Since(began).Round(100*time.Millisecond))
	Eventually(t, 2*time.Minute, "every strategy that worked before works again", func(context.Context) error {
		now := strategies()
		for _, s := range strings.Fields(before) {
			if strings.HasSuffix(s, "=Success") && !strings.Contains(now, s) {
				return fmt.Errorf("%s, before the restart %s", now, before)
			}
		}
		return nil
	})
	Run(t, nil, "kubectl", "-n", "pinniped", "rollout", "status", "deployment/pinniped-agent", "--timeout=2m")
	for _, p := range agentPods(t) {
		t.Logf("%s: %d container restarts", p.name, p.restarts)
		if p.restarts > 3 {
			t.Errorf("%s restarted %d times on the way back: it should wait for what it needs, not crash-loop", p.name, p.restarts)
		}
	}
}
