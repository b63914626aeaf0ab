//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// tuiLogin is one `pinniped login oidc` run against the bed's Dex: the ID
// token is the credential (no agent needed), cached in files under config
// so the test can see exactly what was cached.
type tuiLogin struct {
	pinniped string
	dir      string
	urlFile  string // where $BROWSER writes the link it was asked to open
	outFile  string // the command's stdout: the ExecCredential and nothing else
	config   string // XDG_CONFIG_HOME
	args     []string
	env      []string
	term     *Tmux
}

func newTUILogin(t *testing.T, pinniped string, extraArgs ...string) *tuiLogin {
	t.Helper()
	cfg := Bed.Config()
	dir := t.TempDir()
	l := &tuiLogin{pinniped: pinniped, dir: dir, urlFile: filepath.Join(dir, "url"), outFile: filepath.Join(dir, "stdout"), config: filepath.Join(dir, "config")}
	// $BROWSER records the link; Chromium below plays the person.
	opener := filepath.Join(dir, "open-browser")
	if err := os.WriteFile(opener, []byte("#!/bin/sh\necho \"$1\" > "+l.urlFile+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	l.args = append([]string{"login", "oidc", "--issuer=" + cfg.DexIssuer(), "--ca-bundle=" + cfg.TestbedCAFile(),
		"--client-id=" + testbed.DexClientID, "--credential-cache=file"}, extraArgs...)
	l.env = []string{"BROWSER=" + opener, "XDG_CONFIG_HOME=" + l.config, "TERM=xterm-256color", "LANG=C.UTF-8"}
	return l
}

// inTmux runs the login in a width-column terminal, stdout to a file, as
// kubectl would run it from an interactive shell.
func (l *tuiLogin) inTmux(t *testing.T, width int, extraEnv ...string) *Tmux {
	t.Helper()
	argv := append([]string{"env"}, append(l.env, extraEnv...)...)
	argv = append(argv, "sh", "-c", `"$@" > `+l.outFile+`; echo EXIT=$?; sleep 600`, "sh", l.pinniped)
	l.term = NewTmux(t, width, 30, append(argv, l.args...)...)
	return l.term
}

// authURL waits for the link the CLI asked $BROWSER to open.
func (l *tuiLogin) authURL(t *testing.T) string {
	t.Helper()
	var u string
	Eventually(t, 30*time.Second, "the CLI opens the browser", func(context.Context) error {
		b, err := os.ReadFile(l.urlFile)
		if err != nil {
			return err
		}
		u = strings.TrimSpace(string(b))
		if u == "" {
			return errors.New("empty")
		}
		return nil
	})
	_ = os.Remove(l.urlFile)
	return u
}

// checkCredential: stdout holds exactly one ExecCredential with a token.
func (l *tuiLogin) checkCredential(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(l.outFile)
	if err != nil {
		t.Fatal(err)
	}
	var cred struct {
		Kind   string `json:"kind"`
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	if err := json.Unmarshal(b, &cred); err != nil || cred.Kind != "ExecCredential" || cred.Status.Token == "" {
		t.Fatalf("stdout is not one ExecCredential (%v): %q", err, b)
	}
	if bytes.Contains(b, []byte("\x1b")) {
		t.Fatalf("terminal escape sequences on stdout: %q", b)
	}
}

// cached lists what the login left in the file cache (sessions and
// credentials; lock files do not count).
func (l *tuiLogin) cached(t *testing.T) []string {
	t.Helper()
	var files []string
	_ = filepath.WalkDir(filepath.Join(l.config, "pinniped"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.Contains(p, string(filepath.Separator)+"locks"+string(filepath.Separator)) {
			files = append(files, p)
		}
		return nil
	})
	return files
}

// dexLogin plays the person in Chromium: the login form at Dex, as alice.
// until is what to wait for once the form is submitted.
func dexLogin(t *testing.T, bctx context.Context, authURL string, until chromedp.Action[chromedp.Void]) {
	t.Helper()
	alice := testbed.DexUsers[0]
	steps := []chromedp.Action[chromedp.Void]{
		openPage(authURL, chromedp.WaitVisible(chromedp.ID("login"))),
		chromedp.SendKeys(chromedp.ID("login"), alice.Email),
		chromedp.SendKeys(chromedp.ID("password"), alice.Password),
		chromedp.Click(chromedp.ID("submit-login")),
	}
	if until != nil {
		steps = append(steps, until)
	}
	browserSteps(t, bctx, "log in at Dex as "+alice.Email, steps...)
}

// shot saves a capture of the terminal for docs/tui.md when
// PINNIPED_E2E_TUI_SHOTS names a directory.
func shot(t *testing.T, name, screen string) {
	t.Helper()
	dir := os.Getenv("PINNIPED_E2E_TUI_SHOTS")
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(screen, "\n "), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	if err := os.WriteFile(filepath.Join(dir, name+".txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// joined is the screen with soft-wrapped lines joined, so a long link
// printed above the screen reads as one line.
func joined(m *Tmux) string { return m.tmux("capture-pane", "-p", "-J", "-t", "main") }

func exited(s string) bool { return strings.Contains(s, "EXIT=") }

func contains(parts ...string) func(string) bool {
	return func(s string) bool {
		for _, p := range parts {
			if !strings.Contains(s, p) {
				return false
			}
		}
		return true
	}
}

var linkWithCode = regexp.MustCompile(`https://\S+user_code=\S+`)

// TestTUI drives the interactive login screen in a real terminal (tmux)
// against the bed's Dex, with Chromium as the person's browser, and the same
// logins without a terminal, which must stay plain.
func TestTUI(t *testing.T) {
	pinniped := BuildStatic(t, "./cmd/pinniped")
	alice := testbed.DexUsers[0]

	t.Run("browser login", func(t *testing.T) {
		l := newTUILogin(t, pinniped)
		term := l.inTmux(t, 100)
		authURL := l.authURL(t)
		screen := term.WaitFor(20*time.Second, "the waiting screen", contains("browser window that just opened", "q cancel", "d device code", "p paste code"))
		if !strings.Contains(screen, "logging in to "+Bed.Config().DexIssuer()) || !strings.Contains(joined(term), authURL) {
			t.Fatalf("the screen should name the issuer and print the link:\n%s", screen)
		}
		shot(t, "waiting-for-browser", screen)
		bctx, cancel := Browser(t, context.Background())
		defer cancel()
		dexLogin(t, bctx, authURL, chromedp.WaitVisible(`//h1[contains(., "Logged in")]`))
		screen = term.WaitFor(30*time.Second, "the outcome", exited)
		if !strings.Contains(screen, "EXIT=0") || !strings.Contains(screen, "✓ Logged in as "+alice.Email) ||
			!strings.Contains(screen, "developers, admins") || !strings.Contains(screen, "cached   "+l.config) {
			t.Fatalf("after the browser login:\n%s", screen)
		}
		shot(t, "success", screen)
		l.checkCredential(t)

		// The next run finds the cached credential: no screen at all.
		cmd := exec.CommandContext(context.Background(), pinniped, l.args...)
		cmd.Env = append(BedEnv(), l.env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil || stderr.Len() != 0 {
			t.Fatalf("the cached path should be silent: %v %q", err, stderr.String())
		}
	})

	t.Run("pasted code", func(t *testing.T) {
		// No listener (a remote shell): the browser ends on a page that
		// cannot load, whose address the person pastes back.
		l := newTUILogin(t, pinniped, "--skip-listen")
		term := l.inTmux(t, 100)
		term.WaitFor(20*time.Second, "the screen", contains("Open the login link printed above", "p paste code"))
		term.SendKeys("o") // open the browser again (here: for the first time)
		authURL := l.authURL(t)
		bctx, cancel := Browser(t, context.Background())
		defer cancel()
		redirects := make(chan string, 4)
		listenErr := chromedp.Listen(bctx, func(ev any) {
			if e, ok := ev.(*network.EventRequestWillBeSent); ok && strings.HasPrefix(e.Request.URL, "http://127.0.0.1:0/callback") {
				select {
				case redirects <- e.Request.URL:
				default:
				}
			}
		})
		if listenErr != nil {
			t.Fatal(listenErr)
		}
		dexLogin(t, bctx, authURL, nil)
		var redirect string
		select {
		case redirect = <-redirects:
		case <-time.After(30 * time.Second):
			t.Fatal("the browser never tried the redirect")
		}
		term.SendKeys("p")
		shot(t, "paste-prompt", term.WaitFor(10*time.Second, "the paste prompt", contains("Paste the authorization code", "enter submit")))
		term.SendLiteral("not a code")
		term.SendKeys("Enter")
		term.WaitFor(10*time.Second, "the refusal", contains("! that does not look like", "Paste the authorization code"))
		term.SendKeys("C-u")
		term.SendLiteral(redirect)
		term.SendKeys("Enter")
		screen := term.WaitFor(30*time.Second, "the outcome", exited)
		if !strings.Contains(screen, "EXIT=0") || !strings.Contains(screen, "✓ Logged in as "+alice.Email) {
			t.Fatalf("after pasting the redirect:\n%s", screen)
		}
		l.checkCredential(t)
	})

	t.Run("switch to the device flow", func(t *testing.T) {
		l := newTUILogin(t, pinniped)
		term := l.inTmux(t, 100)
		_ = l.authURL(t) // the browser flow started; the person prefers a code
		term.WaitFor(20*time.Second, "the waiting screen", contains("d device code"))
		term.SendKeys("d")
		screen := term.WaitFor(20*time.Second, "the device code", contains("enter the code", "╭"))
		shot(t, "device-code", screen)
		complete := linkWithCode.FindString(joined(term))
		if complete == "" {
			t.Fatalf("no link with the code printed:\n%s", joined(term))
		}
		bctx, cancel := Browser(t, context.Background())
		defer cancel()
		browserSteps(t, bctx, "approve the device at Dex",
			openPage(complete, chromedp.WaitVisible(chromedp.ID("user_code"))),
			chromedp.Click(chromedp.ID("submit-login")),
			chromedp.WaitVisible(chromedp.ID("login")),
			chromedp.SendKeys(chromedp.ID("login"), alice.Email),
			chromedp.SendKeys(chromedp.ID("password"), alice.Password),
			chromedp.Click(chromedp.ID("submit-login")),
			chromedp.WaitVisible(chromedp.Search("//h2[contains(., 'Login Successful')]")),
		)
		screen = term.WaitFor(30*time.Second, "the outcome", exited)
		if !strings.Contains(screen, "EXIT=0") || !strings.Contains(screen, "✓ Logged in as "+alice.Email) {
			t.Fatalf("after the device login:\n%s", screen)
		}
		l.checkCredential(t)
	})

	t.Run("cancel", func(t *testing.T) {
		l := newTUILogin(t, pinniped)
		term := l.inTmux(t, 100)
		_ = l.authURL(t)
		term.WaitFor(20*time.Second, "the waiting screen", contains("q cancel"))
		term.SendKeys("q")
		screen := term.WaitFor(20*time.Second, "the exit", exited)
		if !strings.Contains(screen, "EXIT=1") || !strings.Contains(screen, "Login cancelled. Nothing was cached") || strings.Contains(screen, "Error:") {
			t.Fatalf("after q:\n%s", screen)
		}
		shot(t, "cancelled", screen)
		if b, _ := os.ReadFile(l.outFile); len(b) != 0 {
			t.Fatalf("a cancelled login printed %q", b)
		}
		if c := l.cached(t); len(c) != 0 {
			t.Fatalf("a cancelled login cached %v", c)
		}
		// The terminal is usable again: the shell's output is not garbled.
		if strings.Contains(screen, "\x1b") || strings.Contains(screen, "[?") {
			t.Fatalf("terminal replies leaked onto the screen:\n%s", screen)
		}
	})

	t.Run("failure", func(t *testing.T) {
		l := newTUILogin(t, pinniped, "--timeout=4s")
		term := l.inTmux(t, 100)
		_ = l.authURL(t)
		screen := term.WaitFor(30*time.Second, "the exit", exited)
		if !strings.Contains(screen, "EXIT=1") || !strings.Contains(screen, "✗ Login failed") || !strings.Contains(screen, "Next: the login took too long") {
			t.Fatalf("after the timeout:\n%s", screen)
		}
		shot(t, "failure", screen)
		if c := l.cached(t); len(c) != 0 {
			t.Fatalf("a failed login cached %v", c)
		}
	})

	// Terminals too small to draw in, or reporting no size at all, get
	// plain lines, and a failed login's error always reaches stderr.
	t.Run("0x0 terminal: plain lines, the error shown", func(t *testing.T) {
		l := newTUILogin(t, pinniped, "--timeout=4s")
		out, code := RunInBarePTY(t, 60*time.Second, append(BedEnv(), l.env...), append([]string{l.pinniped}, l.args...)...)
		if code != 1 || !strings.Contains(out, "Error: ") || !strings.Contains(out, "context deadline exceeded") {
			t.Fatalf("exit %d, terminal:\n%s", code, out)
		}
		if strings.Contains(out, "\x1b[?1049h") || strings.Contains(out, "q cancel") {
			t.Fatalf("the screen was drawn in a 0x0 terminal:\n%q", out)
		}
		if !strings.Contains(out, "Log in by visiting this link") {
			t.Fatalf("the plain lines are missing:\n%s", out)
		}
	})

	t.Run("20x5 terminal: plain lines, the error shown", func(t *testing.T) {
		l := newTUILogin(t, pinniped, "--timeout=4s")
		argv := append([]string{"env"}, l.env...)
		argv = append(argv, "sh", "-c", `"$@" > `+l.outFile+`; echo EXIT=$?; sleep 600`, "sh", l.pinniped)
		term := NewTmux(t, 20, 5, append(argv, l.args...)...)
		term.WaitFor(30*time.Second, "the exit", exited)
		// The whole scroll-back, lines joined: 20 columns wrap everything.
		all := term.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "main")
		if !strings.Contains(all, "EXIT=1") || !strings.Contains(all, "Error: ") || !strings.Contains(all, "context deadline exceeded") {
			t.Fatalf("20x5:\n%s", all)
		}
		if strings.Contains(all, "q cancel") {
			t.Fatalf("the screen was drawn in a 20x5 terminal:\n%s", all)
		}
	})

	t.Run("60 columns", func(t *testing.T) {
		l := newTUILogin(t, pinniped)
		term := l.inTmux(t, 60)
		authURL := l.authURL(t)
		screen := term.WaitFor(20*time.Second, "the waiting screen", contains("q cancel", "d device code", "o open browser"))
		shot(t, "60-columns", screen)
		bctx, cancel := Browser(t, context.Background())
		defer cancel()
		dexLogin(t, bctx, authURL, chromedp.WaitVisible(`//h1[contains(., "Logged in")]`))
		screen = term.WaitFor(30*time.Second, "the outcome", exited)
		if !strings.Contains(screen, "EXIT=0") || !strings.Contains(screen, "✓ Logged in as") {
			t.Fatalf("60 columns:\n%s", screen)
		}
		shot(t, "60-columns-success", screen)
		l.checkCredential(t)
	})

	t.Run("NO_COLOR in a terminal: plain lines, pasted code", func(t *testing.T) {
		l := newTUILogin(t, pinniped, "--skip-listen")
		term := l.inTmux(t, 100, "NO_COLOR=1")
		screen := term.WaitFor(20*time.Second, "the plain prompt", contains("Log in by visiting this link", "paste the authorization code"))
		if strings.Contains(screen, "q cancel") {
			t.Fatalf("NO_COLOR should give the plain renderer:\n%s", screen)
		}
		shot(t, "plain-no-color", screen)
		var authURL string
		for _, f := range strings.Fields(joined(term)) {
			if strings.HasPrefix(f, Bed.Config().DexIssuer()+"/auth") {
				authURL = f
			}
		}
		bctx, cancel := Browser(t, context.Background())
		defer cancel()
		redirects := make(chan string, 4)
		listenErr := chromedp.Listen(bctx, func(ev any) {
			if e, ok := ev.(*network.EventRequestWillBeSent); ok && strings.HasPrefix(e.Request.URL, "http://127.0.0.1:0/callback") {
				select {
				case redirects <- e.Request.URL:
				default:
				}
			}
		})
		if listenErr != nil {
			t.Fatal(listenErr)
		}
		dexLogin(t, bctx, authURL, nil)
		select {
		case r := <-redirects:
			term.SendLiteral(r)
			term.SendKeys("Enter")
		case <-time.After(30 * time.Second):
			t.Fatal("the browser never tried the redirect")
		}
		screen = term.WaitFor(30*time.Second, "the outcome", exited)
		if !strings.Contains(screen, "EXIT=0") || !strings.Contains(screen, "✓ Logged in as "+alice.Email) {
			t.Fatalf("plain pasted login:\n%s", screen)
		}
		l.checkCredential(t)
	})

	t.Run("kubectl says non-interactive: no screen, the browser login still runs", func(t *testing.T) {
		l := newTUILogin(t, pinniped)
		term := l.inTmux(t, 100, `KUBERNETES_EXEC_INFO={"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{"interactive":false}}`)
		authURL := l.authURL(t)
		bctx, cancel := Browser(t, context.Background())
		defer cancel()
		dexLogin(t, bctx, authURL, chromedp.WaitVisible(`//h1[contains(., "Logged in")]`))
		screen := term.WaitFor(30*time.Second, "the exit", exited)
		if !strings.Contains(screen, "EXIT=0") || !strings.Contains(screen, "no terminal to type into") || strings.Contains(screen, "q cancel") {
			t.Fatalf("non-interactive exec info:\n%s", screen)
		}
		l.checkCredential(t)
	})

	t.Run("install --wait in a terminal: spinner, then lines", func(t *testing.T) {
		// An image that cannot be pulled: the wait runs out, and the step
		// cut short must leave a line and a usable terminal behind.
		cfg := Bed.Config()
		t.Cleanup(func() { _, _ = RunE(nil, pinniped, "uninstall") })
		argv := append([]string{"env"}, BedEnv()...)
		argv = append(argv, "TERM=xterm-256color", "LANG=C.UTF-8", "sh", "-c", `"$@"; echo EXIT=$?; sleep 600`, "sh",
			pinniped, "install", "--image=example.invalid/agent:none", "--oidc-issuer="+cfg.DexIssuer(),
			"--oidc-audience="+testbed.DexClientID, "--oidc-ca-bundle="+cfg.TestbedCAFile(), "--timeout=6s")
		term := NewTmux(t, 100, 40, argv...)
		term.WaitFor(30*time.Second, "the spinner", contains("waiting: agent Deployment available (", "✓ applied"))
		screen := term.WaitFor(60*time.Second, "the exit", exited)
		for _, want := range []string{"✓ 3 CustomResourceDefinitions established (", "• waiting: agent Deployment available (stopped after", "Error: not ready after 6s", "EXIT=1"} {
			if !strings.Contains(screen, want) {
				t.Fatalf("screen lacks %q:\n%s", want, screen)
			}
		}
		shot(t, "install-wait", screen)
		if strings.Contains(screen, "[?") {
			t.Fatalf("terminal replies leaked onto the screen:\n%s", screen)
		}
	})

	// Without a terminal (an IDE's kubectl, a pipe): plain lines on stderr,
	// no escape sequences, the same outcomes.
	plainRun := func(t *testing.T, l *tuiLogin) (*exec.Cmd, *lockedBuffer, *lockedBuffer) {
		cmd := exec.CommandContext(context.Background(), pinniped, l.args...)
		cmd.Env = append(BedEnv(), l.env...)
		var stdout, stderr lockedBuffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &stdout, &stderr
	}
	checkPlain := func(t *testing.T, stderr string) {
		if strings.Contains(stderr, "\x1b") || strings.Contains(stderr, "q cancel") {
			t.Fatalf("without a terminal the output must be plain lines:\n%q", stderr)
		}
	}

	t.Run("no terminal: browser login", func(t *testing.T) {
		l := newTUILogin(t, pinniped)
		cmd, stdout, stderr := plainRun(t, l)
		authURL := l.authURL(t)
		bctx, cancel := Browser(t, context.Background())
		defer cancel()
		dexLogin(t, bctx, authURL, chromedp.WaitVisible(`//h1[contains(., "Logged in")]`))
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		if !strings.Contains(stderr.String(), "Log in by visiting this link") || !strings.Contains(stderr.String(), "✓ Logged in as "+alice.Email) {
			t.Fatalf("plain browser login:\n%s", stderr)
		}
		checkPlain(t, stderr.String())
		_ = os.WriteFile(l.outFile, []byte(stdout.String()), 0o600)
		l.checkCredential(t)
	})

	t.Run("no terminal: device flow", func(t *testing.T) {
		l := newTUILogin(t, pinniped, "--flow=device")
		cmd, _, stderr := plainRun(t, l)
		var complete string
		Eventually(t, 20*time.Second, "the device code on stderr", func(context.Context) error {
			if complete = linkWithCode.FindString(stderr.String()); complete == "" {
				return errors.New("not yet")
			}
			return nil
		})
		bctx, cancel := Browser(t, context.Background())
		defer cancel()
		browserSteps(t, bctx, "approve the device at Dex",
			openPage(complete, chromedp.WaitVisible(chromedp.ID("user_code"))),
			chromedp.Click(chromedp.ID("submit-login")),
			chromedp.WaitVisible(chromedp.ID("login")),
			chromedp.SendKeys(chromedp.ID("login"), alice.Email),
			chromedp.SendKeys(chromedp.ID("password"), alice.Password),
			chromedp.Click(chromedp.ID("submit-login")),
			chromedp.WaitVisible(chromedp.Search("//h2[contains(., 'Login Successful')]")),
		)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		if !strings.Contains(stderr.String(), "enter the code") || !strings.Contains(stderr.String(), "✓ Logged in as") {
			t.Fatalf("plain device login:\n%s", stderr)
		}
		checkPlain(t, stderr.String())
	})

	t.Run("no terminal: interrupt", func(t *testing.T) {
		l := newTUILogin(t, pinniped)
		cmd, stdout, stderr := plainRun(t, l)
		_ = l.authURL(t)
		_ = cmd.Process.Signal(syscall.SIGINT)
		err := cmd.Wait()
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) || exitErr.ExitCode() != 130 {
			t.Fatalf("want exit code 130 after SIGINT, got %v\n%s", err, stderr)
		}
		if stdout.Len() != 0 || len(l.cached(t)) != 0 {
			t.Fatalf("an interrupted login printed %q and cached %v", stdout, l.cached(t))
		}
		checkPlain(t, stderr.String())
	})
}

// lockedBuffer collects a subprocess's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedBuffer) Len() int { return len(l.String()) }
