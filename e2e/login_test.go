//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// userKubeconfig grants Dex group "developers" view rights and writes the
// kubeconfig `pinniped get kubeconfig` makes.
func userKubeconfig(t *testing.T, pinniped string, extra ...string) string {
	t.Helper()
	if _, err := RunE(nil, "kubectl", "get", "clusterrolebinding", "e2e-login-view"); err != nil {
		Kubectl(t, "create", "clusterrolebinding", "e2e-login-view", "--clusterrole=view", "--group=developers")
		t.Cleanup(func() { _, _ = RunE(nil, "kubectl", "delete", "clusterrolebinding", "e2e-login-view") })
	}
	f := filepath.Join(t.TempDir(), "user.kubeconfig")
	if err := os.WriteFile(f, []byte(Run(t, nil, pinniped, append([]string{"get", "kubeconfig"}, extra...)...)), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// reencodeCABundle appends a newline to the concierge CA bundle in a
// kubeconfig's login arguments: the same CA, but a different cluster
// credential cache key (the OIDC session key does not include it).
func reencodeCABundle(t *testing.T, kubeconfig string) string {
	t.Helper()
	const flag = "--concierge-ca-bundle-data="
	i := strings.Index(kubeconfig, flag)
	if i < 0 {
		t.Fatal("no concierge CA bundle in the kubeconfig")
	}
	start := i + len(flag)
	end := start + strings.IndexAny(kubeconfig[start:], "\n\"' ")
	pemData, err := base64.StdEncoding.DecodeString(kubeconfig[start:end])
	if err != nil {
		t.Fatal(err)
	}
	return kubeconfig[:start] + base64.StdEncoding.EncodeToString(append(pemData, '\n')) + kubeconfig[end:]
}

// TestLogin drives the real CLI through kubectl's exec plugin: a browser
// login in headless Chromium from a terminal, then the keyring cache; twenty
// racing kubectl calls on an empty cache; and the file fallback without D-Bus.
func TestLogin(t *testing.T) {
	pinniped := installAgent(t)
	alice := testbed.DexUsers[0]

	t.Run("browser login once, then the keyring cache", func(t *testing.T) {
		_, _ = RunE(nil, pinniped, "logout", "--all")
		kubeconfig := userKubeconfig(t, pinniped)
		dir := t.TempDir()
		urlFile := filepath.Join(dir, "url")
		// $BROWSER records the link; Chromium below plays the person.
		opener := filepath.Join(dir, "open-browser")
		if err := os.WriteFile(opener, []byte("#!/bin/sh\necho \"$1\" > "+urlFile+"\n"), 0o700); err != nil {
			t.Fatal(err)
		}
		config := filepath.Join(dir, "config")
		env := []string{"KUBECONFIG=" + kubeconfig, "BROWSER=" + opener, "XDG_CONFIG_HOME=" + config}
		// kubectl sees a terminal, so it tells the plugin a person is there.
		term := NewTmux(t, 160, 40, append(append([]string{"env"}, env...), "sh", "-c", "kubectl get namespaces; echo EXIT=$?; sleep 600")...)
		var authURL string
		Eventually(t, 30*time.Second, "the CLI opens the browser", func(context.Context) error {
			b, err := os.ReadFile(urlFile)
			if err != nil {
				return err
			}
			// The opener's redirect creates the file before it writes to it.
			if authURL = strings.TrimSpace(string(b)); authURL == "" {
				return errors.New("empty")
			}
			return nil
		})
		// kubectl passes its terminal on, so the login screen (cli/ui/tui) shows the link.
		term.WaitFor(10*time.Second, "the login link on the terminal", func(s string) bool { return strings.Contains(s, "Login link:") })
		bctx, cancel := Browser(t, context.Background())
		defer cancel()
		browserSteps(t, bctx, "log in at Dex through the CLI's link",
			openPage(authURL, chromedp.WaitVisible(chromedp.ID("login"))),
			chromedp.SendKeys(chromedp.ID("login"), alice.Email),
			chromedp.SendKeys(chromedp.ID("password"), alice.Password),
			chromedp.Click(chromedp.ID("submit-login")),
			chromedp.WaitVisible(`//h1[contains(., "Logged in")]`),
		)
		screen := term.WaitFor(30*time.Second, "kubectl's answer", func(s string) bool { return strings.Contains(s, "EXIT=") })
		if !strings.Contains(screen, "EXIT=0") || !strings.Contains(screen, "kube-system") || !strings.Contains(screen, "Logged in as "+alice.Email) {
			t.Fatalf("kubectl after the browser login:\n%s", screen)
		}

		// Again, without a terminal: the cache answers, no browser opens.
		_ = os.Remove(urlFile)
		out, err := RunE(env, "kubectl", "get", "namespaces")
		if err != nil || !strings.Contains(out, "kube-system") {
			t.Fatalf("cached kubectl: %v %s", err, out)
		}
		if _, err := os.Stat(urlFile); err == nil {
			t.Fatal("a cached login opened the browser again")
		}
		// The credential went to the keyring, not to files.
		if files, _ := filepath.Glob(filepath.Join(config, "pinniped", "credentials", "*")); len(files) != 0 {
			t.Fatalf("with a working keyring nothing belongs in files, found %v", files)
		}
		status := Run(t, env, pinniped, "status")
		if !strings.Contains(status, "OS keyring") {
			t.Fatalf("pinniped status should say the keyring holds the credential:\n%s", status)
		}

		// A second cluster entry shares the OIDC session but not the cluster
		// credential: with Dex's 10-minute ID tokens the session must be
		// refreshed, silently, with nobody at a terminal.
		raw, _ := os.ReadFile(kubeconfig)
		other := reencodeCABundle(t, string(raw))
		kubeconfig2 := filepath.Join(dir, "other.kubeconfig")
		_ = os.WriteFile(kubeconfig2, []byte(other), 0o600)
		env2 := []string{"KUBECONFIG=" + kubeconfig2, "BROWSER=" + opener, "XDG_CONFIG_HOME=" + config}
		cmd := exec.CommandContext(context.Background(), "kubectl", "get", "namespaces")
		cmd.Env = append(BedEnv(), env2...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("kubectl with the shared session: %v\n%s", err, stderr.String())
		}
		// Silent: kubectl's stderr is empty on a renewal (scripts capture
		// it; full-screen clients share their terminal with it).
		if stderr.Len() != 0 {
			t.Fatalf("a renewal that needs nobody wrote to kubectl's stderr:\n%s", stderr.String())
		}
		if _, err := os.Stat(urlFile); err == nil {
			t.Fatal("the refresh opened a browser")
		}
	})

	t.Run("kubectl with stdin from a pipe logs in through the browser", func(t *testing.T) {
		// What an IDE (Lens, Headlamp, VS Code) or a script gives kubectl:
		// no terminal, so the plugin hears interactive=false. A browser
		// login needs no terminal, so it runs; only prompts are skipped.
		_, _ = RunE(nil, pinniped, "logout", "--all")
		kubeconfig := userKubeconfig(t, pinniped)
		run := startBrowserKubectl(t, []string{"KUBECONFIG=" + kubeconfig}, strings.NewReader("") /* a pipe, at its end */, "get", "namespaces")
		bctx, cancel := Browser(t, context.Background())
		defer cancel()
		dexLogin(t, bctx, run.URL, chromedp.WaitVisible(`//h1[contains(., "Logged in")]`))
		if out := run.wait(t, 60*time.Second, func() string { return pageState(bctx) }); !strings.Contains(out, "kube-system") {
			t.Fatalf("kubectl answered %q\n%s", out, run.stderr.String())
		}
		for _, want := range []string{"no terminal to type into", "Log in by visiting this link"} {
			if !strings.Contains(run.stderr.String(), want) {
				t.Errorf("stderr lacks %q:\n%s", want, run.stderr.String())
			}
		}
	})

	t.Run("twenty concurrent kubectl calls cause one login", func(t *testing.T) {
		_, _ = RunE(nil, pinniped, "logout", "--all")
		kubeconfig := userKubeconfig(t, pinniped, "--oidc-flow=password")
		// PINNIPED_DEBUG: a login from the environment is silent otherwise,
		// and each fresh login's outcome is what is counted.
		env := []string{"KUBECONFIG=" + kubeconfig, "XDG_CONFIG_HOME=" + t.TempDir(), "PINNIPED_DEBUG=true",
			"PINNIPED_USERNAME=" + alice.Email, "PINNIPED_PASSWORD=" + alice.Password}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var logins int
		var failures []string
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd := exec.CommandContext(context.Background(), "kubectl", "get", "namespaces", "-o", "name")
				cmd.Env = append(BedEnv(), env...)
				var stderr strings.Builder
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				mu.Lock()
				defer mu.Unlock()
				logins += strings.Count(stderr.String(), "Logged in as")
				if err != nil || !strings.Contains(string(out), "namespace/kube-system") {
					failures = append(failures, fmt.Sprintf("call %d: %v\n%s", i, err, stderr.String()))
				}
			}()
		}
		wg.Wait()
		if len(failures) > 0 {
			t.Fatalf("%d calls failed:\n%s", len(failures), strings.Join(failures, "\n"))
		}
		if logins != 1 {
			t.Fatalf("%d logins for 20 concurrent calls, want exactly 1", logins)
		}
	})

	t.Run("device flow, the browser on another device", func(t *testing.T) {
		cfg := Bed.Config()
		_, _ = RunE(nil, pinniped, "logout", "--all") // so the device flow really runs
		kubeconfig := userKubeconfig(t, pinniped, "--oidc-flow=device")
		if !strings.Contains(string(mustRead(t, kubeconfig)), "--flow=device") {
			t.Fatal("get kubeconfig --oidc-flow=device did not carry the flow into the kubeconfig")
		}
		// An SSH session: a terminal, no browser.
		env := []string{"KUBECONFIG=" + kubeconfig, "XDG_CONFIG_HOME=" + t.TempDir(), "BROWSER=false"}
		term := NewTmux(t, 200, 40, append(append([]string{"env"}, env...), "sh", "-c", "kubectl get namespaces; echo EXIT=$?; sleep 600")...)
		screen := term.WaitFor(30*time.Second, "the device code", func(s string) bool { return strings.Contains(s, "user_code=") })
		var complete string
		for _, line := range strings.Fields(screen) {
			if strings.HasPrefix(line, cfg.DexIssuer()) && strings.Contains(line, "user_code=") {
				complete = line
			}
		}
		if complete == "" {
			t.Fatalf("no verification link with the code on screen:\n%s", screen)
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
		screen = term.WaitFor(30*time.Second, "kubectl's answer", func(s string) bool { return strings.Contains(s, "EXIT=") })
		if !strings.Contains(screen, "EXIT=0") || !strings.Contains(screen, "kube-system") {
			t.Fatalf("kubectl after the device login:\n%s", screen)
		}
	})

	t.Run("a hung keyring is abandoned within the timeout", func(t *testing.T) {
		kubeconfig := userKubeconfig(t, pinniped, "--oidc-flow=password")
		// Freeze the Secret Service, as an unanswered unlock prompt would.
		pid := keyringPID(t)
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = syscall.Kill(pid, syscall.SIGCONT) }()
		config := t.TempDir()
		cmd := exec.CommandContext(context.Background(), "kubectl", "get", "namespaces")
		cmd.Env = append(BedEnv(), "KUBECONFIG="+kubeconfig, "XDG_CONFIG_HOME="+config,
			"PINNIPED_USERNAME="+alice.Email, "PINNIPED_PASSWORD="+alice.Password)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
		took := time.Since(start)
		if !strings.Contains(stderr.String(), "did not answer in time") {
			t.Fatalf("no word about the hung keyring:\n%s", stderr.String())
		}
		// One 3 s timeout, then files for the rest of the process.
		if took > 12*time.Second {
			t.Fatalf("kubectl took %v with a hung keyring", took)
		}
		if files, _ := filepath.Glob(filepath.Join(config, "pinniped", "credentials", "*.cred")); len(files) == 0 {
			t.Fatal("the credential was not kept in files instead")
		}
		t.Logf("kubectl with a frozen keyring answered in %v", took.Round(10*time.Millisecond))

		// The next kubectl call remembers the hang and does not wait again.
		again := exec.CommandContext(context.Background(), "kubectl", "get", "namespaces")
		again.Env = cmd.Env
		start = time.Now()
		if out, err := again.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("the second call waited on the frozen keyring again: %v", took)
		}
	})

	t.Run("no D-Bus: file fallback with a warning", func(t *testing.T) {
		kubeconfig := userKubeconfig(t, pinniped, "--oidc-flow=password")
		config := t.TempDir()
		env := []string{"KUBECONFIG=" + kubeconfig, "XDG_CONFIG_HOME=" + config, "DBUS_SESSION_BUS_ADDRESS=", "XDG_RUNTIME_DIR=",
			"PINNIPED_USERNAME=" + alice.Email, "PINNIPED_PASSWORD=" + alice.Password}
		cmd := exec.CommandContext(context.Background(), "kubectl", "get", "namespaces")
		cmd.Env = append(BedEnv(), env...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
		if !strings.Contains(stderr.String(), "OS keyring unavailable") {
			t.Fatalf("no warning about the file fallback:\n%s", stderr.String())
		}
		files, _ := filepath.Glob(filepath.Join(config, "pinniped", "credentials", "*.cred"))
		if len(files) == 0 {
			t.Fatal("no credential file written")
		}
		for _, f := range files {
			if info, _ := os.Stat(f); info.Mode().Perm() != 0o600 {
				t.Errorf("%s has mode %v", f, info.Mode().Perm())
			}
		}
	})
}

// keyringPID is the tests' gnome-keyring-daemon.
func keyringPID(t *testing.T) int {
	t.Helper()
	KeyringSession(t)
	keyringDaemon.Lock()
	defer keyringDaemon.Unlock()
	if keyringDaemon.cmd == nil || keyringDaemon.cmd.Process == nil {
		t.Fatal("no keyring daemon")
	}
	return keyringDaemon.cmd.Process.Pid
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
