//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// browserKubectl is a kubectl run whose login goes through a browser: its
// BROWSER records the login link instead of opening anything, so the test
// can hand the link to headless Chromium.
type browserKubectl struct {
	// URL is the login link the CLI asked the browser to open.
	URL            string
	stdout, stderr bytes.Buffer
	done           chan error
	cmd            *exec.Cmd
	name           string
}

// startBrowserKubectl starts kubectl args with env (KUBECONFIG and the
// like), a config directory of its own and stdin, and waits until the CLI
// asks for a browser.
func startBrowserKubectl(t *testing.T, env []string, stdin io.Reader, args ...string) *browserKubectl {
	t.Helper()
	return startBrowserCommand(t, env, stdin, "kubectl", args...)
}

// startBrowserCommand is startBrowserKubectl for any program, e.g. `pinniped login oidc`
// run on its own. A XDG_CONFIG_HOME in env replaces the one of its own.
func startBrowserCommand(t *testing.T, env []string, stdin io.Reader, name string, args ...string) *browserKubectl {
	t.Helper()
	dir := t.TempDir()
	urlFile := filepath.Join(dir, "url")
	opener := filepath.Join(dir, "open-browser")
	if err := os.WriteFile(opener, []byte("#!/bin/sh\necho \"$1\" > "+urlFile+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	b := &browserKubectl{done: make(chan error, 1), name: filepath.Base(name)}
	b.cmd = exec.CommandContext(context.Background(), name, args...)
	b.cmd.Env = append(append(BedEnv(), "BROWSER="+opener, "XDG_CONFIG_HOME="+filepath.Join(dir, "config")), env...)
	b.cmd.Stdin = stdin
	b.cmd.Stdout, b.cmd.Stderr = &b.stdout, &b.stderr
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { b.done <- b.cmd.Wait(); close(exited) }()
	// A test that fails before wait() would leave the program running (a login or
	// logout waits minutes for its browser, its loopback listener open).
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = b.cmd.Process.Kill()
			<-exited
		}
	})
	Eventually(t, 30*time.Second, "the CLI opens the browser", func(context.Context) error {
		raw, err := os.ReadFile(urlFile)
		if err != nil {
			return err
		}
		// The opener's redirect creates the file before it writes to it.
		if b.URL = strings.TrimSpace(string(raw)); b.URL == "" {
			return errors.New("empty")
		}
		return nil
	})
	return b
}

// wait returns the program's stdout once it ends, failing the test if it does
// not end within d or fails.
func (b *browserKubectl) wait(t *testing.T, d time.Duration, page func() string) string {
	t.Helper()
	select {
	case err := <-b.done:
		if err != nil {
			t.Fatalf("%s: %v\n%s\n%s", b.name, err, b.stdout.String(), b.stderr.String())
		}
		return b.stdout.String()
	case <-time.After(d):
		_ = b.cmd.Process.Kill()
		t.Fatalf("%s did not finish after the browser login:\n%s\n%s", b.name, b.stderr.String(), page())
		return ""
	}
}
