//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pinniped-kit/pinniped/cli/login"
	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// fullScreen is a full-screen client (e2e/internal/fullscreen, standing in
// for k9s) that asks the cluster who it is every second through the exec
// plugin, which writes to the client's own terminal; a goroutine reads its
// screen four times a second, so that a renewal's stray line is seen
// whenever it is drawn.
type fullScreen struct {
	term    *Tmux
	log     string // countingPlugin's: one line per credential handed over
	errors  string // the client's: one line per failed call
	started time.Time
	stop    chan struct{}
	stopped chan struct{}

	mu      sync.Mutex
	screens int
	foreign string // the first screen with text not the client's own
	err     error  // why a screen could not be read
}

// ownLine is every line of the client's screen, each whole.
var ownLine = regexp.MustCompile(`^(FULLSCREEN CLIENT|calls \d+ failed \d+|last (ok \S+|error))?\s*$`)

func foreignText(screen string) bool {
	for _, line := range strings.Split(screen, "\n") {
		if !ownLine.MatchString(line) {
			return true
		}
	}
	return false
}

// startFullScreen runs the client as alice through kubeconfig's exec plugin
// (her password login unattended, a credential cache of its own) until the
// test ends, once it has its first answer. A noisy one's plugin writes a
// line to the terminal at each renewal: the control that shows a stray
// line is seen.
func startFullScreen(t *testing.T, pinniped string, noisy bool) *fullScreen {
	t.Helper()
	alice := testbed.DexUsers[0]
	kc := userKubeconfig(t, pinniped, "--oidc-flow=password", "--credential-cache=file")
	raw, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := &fullScreen{log: filepath.Join(dir, "credentials.log"), errors: filepath.Join(dir, "errors.log"), started: time.Now(), stop: make(chan struct{}), stopped: make(chan struct{})}
	entry := raw.AuthInfos[raw.Contexts[raw.CurrentContext].AuthInfo].Exec
	entry.Command = countingPlugin(t, dir, entry.Command, f.log)
	if noisy {
		entry.Command = noisyPlugin(t, dir, entry.Command)
	}
	entry.Env = append(entry.Env,
		clientcmdapi.ExecEnvVar{Name: "XDG_CONFIG_HOME", Value: filepath.Join(dir, "config")},
		clientcmdapi.ExecEnvVar{Name: "PINNIPED_USERNAME", Value: alice.Email},
		clientcmdapi.ExecEnvVar{Name: "PINNIPED_PASSWORD", Value: alice.Password})
	clientKC := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*raw, clientKC); err != nil {
		t.Fatal(err)
	}
	f.term = NewTmux(t, 100, 20, BuildStatic(t, "./e2e/internal/fullscreen"), clientKC, f.errors)
	f.term.WaitFor(60*time.Second, "the full-screen client's first answer", func(s string) bool { return strings.Contains(s, "last ok "+alice.Email) })
	go f.watch()
	t.Cleanup(f.halt)
	return f
}

// noisyPlugin wraps command so that it writes one line to stderr (the
// client's terminal) whenever it hands over a credential other than the
// last one: what a renewal that talks would do.
func noisyPlugin(t *testing.T, dir, command string) string {
	t.Helper()
	last := filepath.Join(dir, "noisy-last")
	for _, p := range []string{command, last} {
		if strings.ContainsAny(p, "'\n") {
			t.Fatalf("path %q cannot be quoted for sh", p)
		}
	}
	script := fmt.Sprintf(`#!/bin/sh
out=$('%s' "$@") || exit
sum=$(printf '%%s' "$out" | sha256sum | cut -c1-16)
if [ -f '%s' ] && [ "$(cat '%s')" != "$sum" ]; then echo "pinniped: renewed the credential" >&2; fi
printf '%%s' "$sum" > '%s'
printf '%%s\n' "$out"
`, command, last, last, last)
	wrapper := filepath.Join(dir, "noisy-plugin")
	if err := os.WriteFile(wrapper, []byte(script), 0o700); err != nil { //nolint:gosec // G306: an executable for this test's user only
		t.Fatal(err)
	}
	return wrapper
}

func (f *fullScreen) watch() {
	defer close(f.stopped)
	for {
		select {
		case <-f.stop:
			return
		case <-time.After(250 * time.Millisecond):
		}
		s, err := f.term.ScreenE()
		f.mu.Lock()
		f.screens++
		if err != nil && f.err == nil {
			f.err = err
		}
		if err == nil && f.foreign == "" && foreignText(s) {
			f.foreign = s
		}
		f.mu.Unlock()
	}
}

func (f *fullScreen) halt() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	<-f.stopped
}

// finish waits until the client has had renewals new credentials (at most
// 4 minutes from its start), stops reading, and fails the test if any
// screen showed foreign text, the last one included, or a call failed for
// any reason but client-go's own (rotationCut).
func (f *fullScreen) finish(t *testing.T, renewals int) {
	t.Helper()
	summary, err := f.verdict(renewals)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(summary)
}

// verdict is finish's judgement: what it saw, or why it fails.
func (f *fullScreen) verdict(renewals int) (string, error) {
	for time.Since(f.started) < 4*time.Minute && len(credentialsSeen(f.log)) <= renewals {
		time.Sleep(time.Second)
	}
	time.Sleep(3 * time.Second) // what the last renewal's calls would draw
	f.halt()
	final, err := f.term.ScreenE() // not Screen: that would fail the parent test from here
	if err != nil {
		return "", fmt.Errorf("reading the client's last screen: %w", err)
	}
	n := len(credentialsSeen(f.log))
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.err != nil:
		return "", fmt.Errorf("reading the client's screen: %w", f.err)
	case f.foreign != "":
		return "", fmt.Errorf("foreign text on the client's screen:\n%s", f.foreign)
	case foreignText(final):
		return "", fmt.Errorf("foreign text on the client's last screen:\n%s", final)
	case n <= renewals:
		return "", fmt.Errorf("only %d credentials in 4 minutes: the renewals this test is about did not happen", n)
	}
	errs, _ := os.ReadFile(f.errors)
	failed := strings.Split(strings.TrimSpace(string(errs)), "\n")
	if len(errs) == 0 {
		failed = nil
	}
	// Each renewal (not the first credential: nothing to close then) may
	// excuse one such failure at most.
	news := credentialsSeen(f.log)
	var renewed []time.Time
	if len(news) > 1 {
		renewed = slices.Clone(news[1:])
	}
	for _, line := range failed {
		var ok bool
		if renewed, ok = rotationCut(line, renewed); !ok {
			return "", fmt.Errorf("a call failed across the renewals, and not as client-go's certificate rotation fails one:\n%s\nthe client's errors:\n%s\nnew credentials from the plugin at %v", final, errs, news)
		}
	}
	// The screen was read first: a call failing after it may be in the log.
	if m := failedOnScreen.FindStringSubmatch(final); m == nil || (m[1] != strconv.Itoa(len(failed)) && m[1] != strconv.Itoa(len(failed)-1)) {
		return "", fmt.Errorf("the client's screen and its error log disagree:\n%s\n%s", final, errs)
	}
	summary := fmt.Sprintf("%d credentials (%d renewals), %d screens read, none with foreign text:\n%s", n, n-1, f.screens, final)
	if len(failed) > 0 {
		summary = fmt.Sprintf("client-go's certificate rotation failed %d call(s) at a renewal, as it does without pinniped proxy:\n%s\n%s", len(failed), errs, summary)
	}
	return summary, nil
}

var failedOnScreen = regexp.MustCompile(`failed (\d+)`)

// rotationCut says whether a failed call (a line of the full-screen client's
// error log: "RFC3339Nano-time call N: error") is the one client-go itself
// fails at a certificate renewal: given a new client certificate, it closes
// all its connections and then, in the same round trip, may write the call
// to one of them before HTTP/2 has noticed ("use of closed network
// connection"), and does not retry. No plugin can prevent that; pinniped
// proxy does (TestLongLived's "pinniped proxy"). It counts only right after
// a renewal, once per renewal (the one matched is removed from those
// returned): a refused credential (401) or anything else fails.
func rotationCut(line string, renewals []time.Time) ([]time.Time, bool) {
	when, rest, ok := strings.Cut(line, " ")
	if !ok || !strings.Contains(rest, "use of closed network connection") {
		return renewals, false
	}
	at, err := time.Parse(time.RFC3339Nano, when)
	if err != nil {
		return renewals, false
	}
	for i, n := range renewals {
		if d := at.Sub(n); d >= 0 && d < 2*time.Second {
			return slices.Delete(renewals, i, i+1), true
		}
	}
	return renewals, false
}

// TestNoPromptStorm: an IDE runs kubectl without a terminal every second
// or so, each call given up after 20 s; nobody completes the browser login
// the first one starts. At most one browser opens; every other call fails
// fast with one line saying a login waits and the command that logs in
// ahead; a person's `pinniped login --context` then serves them all from
// the cache. It runs with the default cool-off (5 minutes), and shows what
// follows when that runs out: the record of the waiting login is dated
// back past it (rather than the test waiting 5 minutes), and the next
// call starts one new login, one browser, while the calls beside it fail
// fast again. (50 calls over 40 s: the test takes about two minutes.)
func TestNoPromptStorm(t *testing.T) {
	if Bed.Config().Profile != testbed.ProfileKubeadm {
		t.Skip("the cool-off is the CLI's alone, the same whatever the cluster")
	}
	pinniped := installAgent(t)
	// Files of the test's own: nothing another test left in the keyring.
	kc := userKubeconfig(t, pinniped, "--credential-cache=file")
	raw, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	contextName := raw.CurrentContext
	dir := t.TempDir()
	opens := filepath.Join(dir, "opens")
	opener := filepath.Join(dir, "open-browser")
	if err := os.WriteFile(opener, []byte("#!/bin/sh\necho \"$1\" >> "+opens+"\n"), 0o700); err != nil { //nolint:gosec // G306: an executable of the test's
		t.Fatal(err)
	}
	config := filepath.Join(dir, "config")
	// No PINNIPED_LOGIN_COOLOFF: the default, as users have it.
	env := append(BedEnv(), "KUBECONFIG="+kc, "XDG_CONFIG_HOME="+config, "BROWSER="+opener)
	for _, e := range os.Environ() {
		if strings.HasPrefix(e, "PINNIPED_LOGIN_COOLOFF=") {
			t.Fatalf("the environment sets %s: this test is about the default", e)
		}
	}

	// storm runs n calls as an IDE does (the first five at once, then one
	// every 0.8 s, each given up after 20 s), checks that wantOpened
	// browsers have opened in all and that every call but the one that
	// opened a browser failed fast with the line saying what to do, and
	// says how many did.
	storm := func(n, wantOpened int) (fast int) {
		t.Helper()
		type call struct {
			took   time.Duration
			err    error
			stderr string
		}
		var mu sync.Mutex
		var calls []call
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, "kubectl", "get", "namespaces", "-o", "name")
				cmd.Env = env
				// What an IDE does at its timeout: the call, plugin and all, is gone.
				cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
				var stderr strings.Builder
				cmd.Stderr = &stderr
				start := time.Now()
				err := cmd.Run()
				mu.Lock()
				calls = append(calls, call{time.Since(start), err, stderr.String()})
				mu.Unlock()
			}()
			if i >= 4 {
				time.Sleep(800 * time.Millisecond)
			}
		}
		wg.Wait()
		opened, _ := os.ReadFile(opens)
		if got := strings.Count(string(opened), "\n"); got != wantOpened {
			t.Fatalf("%d browsers opened in all, want %d", got, wantOpened)
		}
		slow := 0
		for _, c := range calls {
			switch {
			case c.err == nil:
				t.Fatalf("a call succeeded although nobody logged in:\n%s", c.stderr)
			case c.took >= 15*time.Second:
				slow++ // the one that opened the browser, given up by the "IDE"
			case !strings.Contains(c.stderr, "a login is waiting for you") || !strings.Contains(c.stderr, "pinniped login --context "+contextName):
				t.Fatalf("a call failed without the one line saying what to do (after %v):\n%s", c.took, c.stderr)
			case c.took > 5*time.Second:
				t.Fatalf("a call took %v to say a login is waiting; it must fail fast:\n%s", c.took, c.stderr)
			default:
				fast++
			}
		}
		if slow > 1 {
			t.Fatalf("%d calls waited out their timeout, want only the one that opened the browser", slow)
		}
		return fast
	}
	fast := storm(50, 1)
	t.Logf("50 calls: 1 browser, %d answered at once with the cool-off's line, the rest waited (the browser's)", fast)

	// The cool-off runs out: the record of the waiting login says it
	// started longer ago than the default allows, as it will 5 minutes
	// on. The next call starts one new login, one more browser; the
	// calls beside it fail fast again, under the new record.
	var records []string
	_ = filepath.WalkDir(config, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".waiting") {
			records = append(records, path)
		}
		return nil
	})
	if len(records) != 1 {
		t.Fatalf("%d records of a waiting login under %s, want 1: %v", len(records), config, records)
	}
	backdated, err := json.Marshal(map[string]time.Time{"started": time.Now().Add(-login.DefaultCoolOff - time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(records[0], backdated, 0o600); err != nil {
		t.Fatal(err)
	}
	fast = storm(10, 2)
	t.Logf("after the cool-off: 10 calls, 1 more browser, %d answered at once again", fast)

	// A person logs in ahead; then every call is served from the cache.
	ahead := startBrowserCommand(t, []string{"KUBECONFIG=" + kc, "XDG_CONFIG_HOME=" + config}, nil,
		pinniped, "login", "--context", contextName)
	bctx, cancel := Browser(t, context.Background())
	defer cancel()
	dexLogin(t, bctx, ahead.URL, chromedp.WaitVisible(`//h1[contains(., "Logged in")]`))
	ahead.wait(t, 60*time.Second, func() string { return pageState(bctx) })
	if !strings.Contains(ahead.stderr.String(), "is logged in") {
		t.Fatalf("pinniped login --context said:\n%s", ahead.stderr.String())
	}
	for i := range 5 {
		cmd := exec.CommandContext(context.Background(), "kubectl", "get", "namespaces", "-o", "name")
		cmd.Env = env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), "namespace/kube-system") || stderr.Len() != 0 {
			t.Fatalf("call %d after the login ahead: %v\n%s%s", i, err, out, stderr.String())
		}
	}
	if opened, _ := os.ReadFile(opens); strings.Count(string(opened), "\n") != 2 {
		t.Fatal("a browser opened for a call after the login ahead")
	}
}

// TestFleetOneLogin: one `get kubeconfig` call for two contexts (the bed's
// cluster reached at two addresses, standing in for two clusters) writes
// one kubeconfig, warning that both accept the same token; clusters that
// trust one issuer share its session, so one browser login serves both,
// and status lists both under it.
func TestFleetOneLogin(t *testing.T) {
	if Bed.Config().Profile != testbed.ProfileKubeadm {
		t.Skip("the login is the same on both profiles; kubeadm reaches the API server at either address")
	}
	pinniped := installAgent(t)
	_ = userKubeconfig(t, pinniped) // the developers' view rights
	cfg := Bed.Config()
	admin, err := clientcmd.LoadFromFile(cfg.AdminKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	cur := admin.Contexts[admin.CurrentContext]
	base := admin.Clusters[cur.Cluster]
	east, west := base.DeepCopy(), base.DeepCopy()
	west.Server = fmt.Sprintf("https://127.0.0.1:%d", cfg.APIServerPort)
	if east.Server == west.Server {
		t.Fatalf("the admin kubeconfig already names %s: the two clusters would be one", west.Server)
	}
	admin.Clusters = map[string]*clientcmdapi.Cluster{"east": east, "west": west}
	admin.Contexts = map[string]*clientcmdapi.Context{
		"east": {Cluster: "east", AuthInfo: cur.AuthInfo}, "west": {Cluster: "west", AuthInfo: cur.AuthInfo}}
	admin.CurrentContext = "east"
	dir := t.TempDir()
	adminKC := filepath.Join(dir, "admin.kubeconfig")
	if err := clientcmd.WriteToFile(*admin, adminKC); err != nil {
		t.Fatal(err)
	}
	fleet := filepath.Join(dir, "fleet.kubeconfig")
	gctx, gcancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer gcancel()
	get := exec.CommandContext(gctx, pinniped, "get", "kubeconfig", "--kubeconfig", adminKC, "--context", "east", "--context", "west", "--credential-cache=file", "-o", fleet)
	get.Env = BedEnv()
	var getErr strings.Builder
	get.Stderr = &getErr
	if out, err := get.Output(); err != nil {
		t.Fatalf("get kubeconfig: %v\nstdout:\n%s\nstderr:\n%s", err, out, getErr.String())
	}
	// Both clusters' JWTAuthenticators take the ID token itself (audience:
	// the client ID), so a token sent to one is good at the other: the
	// admin who writes the kubeconfig is told, naming both contexts.
	shared := fmt.Sprintf("warning: contexts east-pinniped, west-pinniped accept the same ID token (issuer %s, audience %s): ", cfg.DexIssuer(), testbed.DexClientID)
	if !strings.Contains(getErr.String(), shared) {
		t.Fatalf("get kubeconfig did not say that both clusters accept one token; stderr:\n%s", getErr.String())
	}
	gen, err := clientcmd.LoadFromFile(fleet)
	if err != nil {
		t.Fatal(err)
	}
	if len(gen.Contexts) != 2 || gen.Clusters["west-pinniped"] == nil || gen.Clusters["west-pinniped"].Server != west.Server {
		t.Fatalf("one kubeconfig for two clusters: %v", gen.Contexts)
	}

	config := filepath.Join(dir, "config")
	run := startBrowserKubectl(t, []string{"KUBECONFIG=" + fleet, "XDG_CONFIG_HOME=" + config}, nil, "--context", "east-pinniped", "get", "namespaces", "-o", "name")
	bctx, cancel := Browser(t, context.Background())
	defer cancel()
	dexLogin(t, bctx, run.URL, chromedp.WaitVisible(`//h1[contains(., "Logged in")]`))
	if out := run.wait(t, 60*time.Second, func() string { return pageState(bctx) }); !strings.Contains(out, "namespace/kube-system") {
		t.Fatalf("east: %q", out)
	}
	// West: no browser (BROWSER=false fails a login that opens one), the
	// session serves.
	wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
	defer wcancel()
	cmd := exec.CommandContext(wctx, "kubectl", "--context", "west-pinniped", "get", "namespaces", "-o", "name")
	cmd.Env = append(BedEnv(), "KUBECONFIG="+fleet, "XDG_CONFIG_HOME="+config, "BROWSER=false")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "namespace/kube-system") || stderr.Len() != 0 {
		t.Fatalf("west, after east's login: %v\n%s%s", err, out, stderr.String())
	}
	status := Run(t, []string{"XDG_CONFIG_HOME=" + config, "DBUS_SESSION_BUS_ADDRESS=", "XDG_RUNTIME_DIR="}, pinniped, "status")
	session := strings.Index(status, "Session at "+cfg.DexIssuer())
	if session < 0 || strings.Index(status, east.Server) < session || strings.Index(status, west.Server) < session || strings.Count(status, "Session at") != 1 {
		t.Fatalf("status does not list both clusters under the one session:\n%s", status)
	}
}
