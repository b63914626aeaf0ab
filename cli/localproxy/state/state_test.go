package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/cache/privatedir"
	"github.com/pinniped-kit/pinniped/cli/credstore"
)

func newDir(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "pinniped", "proxy")
}

// TestDefaultDir: the proxy's state lives in pinniped's configuration
// directory, as the Factory's caches find it.
func TestDefaultDir(t *testing.T) {
	config, err := credstore.Places{Getenv: func(k string) string {
		if k == "XDG_CONFIG_HOME" {
			return "/x/config"
		}
		return ""
	}}.ConfigDir()
	if dir := DefaultDir(config); err != nil || dir != filepath.Join("/x/config", "pinniped", "proxy") {
		t.Errorf("%q %v", dir, err)
	}
}

// TestFilesArePrivate: the directory is 0700 (an existing one of this
// user's is tightened), the secret and state.json 0600.
func TestFilesArePrivate(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("modes are Unix's")
	}
	dir := newDir(t)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := Start(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Stop() }()
	if _, err := r.NewSecret(); err != nil {
		t.Fatal(err)
	}
	info, err := os.Lstat(dir)
	if err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("directory %v %v, want 0700", info.Mode(), err)
	}
	for _, name := range []string{SecretFile, StateFile} {
		info, err := os.Lstat(filepath.Join(dir, name))
		if err != nil || info.Mode().Perm() != 0o600 || !info.Mode().IsRegular() {
			t.Errorf("%s: %v %v, want a 0600 file", name, info.Mode(), err)
		}
	}
}

// TestSecretIsNewEachStart: 32 random bytes, as text a client sends, kept
// in the secret file, different each start.
func TestSecretIsNewEachStart(t *testing.T) {
	dir := newDir(t)
	var seen [][]byte
	for range 2 {
		r, err := Start(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		s, err := r.NewSecret()
		if err != nil {
			t.Fatal(err)
		}
		onDisk, err := ReadSecret(dir)
		if err != nil || !bytes.Equal(onDisk, s) {
			t.Errorf("the secret file holds %d bytes, %v", len(onDisk), err)
		}
		if len(s) != 43 || bytes.ContainsAny(s, " \n+/=") {
			t.Errorf("secret %d bytes, want 43 base64url characters", len(s))
		}
		seen = append(seen, s)
		if err := r.Stop(); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSecret(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after Stop the secret file is still there: %v", err)
		}
	}
	if bytes.Equal(seen[0], seen[1]) {
		t.Error("two starts made the same secret")
	}
}

// TestASecondStartFails: the running lock is held for the proxy's life.
func TestASecondStartFails(t *testing.T) {
	dir := newDir(t)
	first, err := Start(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Start(context.Background(), dir)
	if !errors.Is(err, ErrRunning) || !strings.Contains(err.Error(), fmt.Sprintf("(pid %d)", os.Getpid())) {
		t.Errorf("a second start: %v, want already running (pid %d)", err, os.Getpid())
	}
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	second, err := Start(context.Background(), dir)
	if err != nil {
		t.Fatalf("a start after Stop: %v", err)
	}
	_ = second.Stop()
}

// TestStatus: running while the lock is held; stale when the lock is free
// and a state file was left (the proxy was killed); nothing after a clean
// stop, or before any start (and Status makes no directory).
func TestStatus(t *testing.T) {
	ctx := context.Background()
	dir := newDir(t)
	if rep, err := Status(dir); err != nil || rep.Running || rep.Stale || rep.State != nil {
		t.Errorf("never started: %+v %v", rep, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Status made the directory: %v", err)
	}

	r, err := Start(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := State{Address: "127.0.0.1:47443", Contexts: map[string]Context{
		"kind-a1b2c3": {Context: "kind", Server: "https://10.0.0.1:6443", Expires: time.Now().Add(time.Hour).UTC().Truncate(time.Second), Renewals: 2, State: "ready"},
	}}
	if err := r.Write(&want); err != nil {
		t.Fatal(err)
	}
	rep, err := Status(dir)
	if err != nil || !rep.Running || rep.Stale || rep.State == nil {
		t.Fatalf("running: %+v %v", rep, err)
	}
	if rep.State.PID != os.Getpid() || rep.State.Address != want.Address || time.Since(rep.State.Started) > time.Minute ||
		!rep.State.Contexts["kind-a1b2c3"].Expires.Equal(want.Contexts["kind-a1b2c3"].Expires) || rep.State.Contexts["kind-a1b2c3"].Renewals != 2 {
		t.Errorf("state %+v", rep.State)
	}
	// Status looked without taking the lock from the proxy.
	if _, err := Start(ctx, dir); !errors.Is(err, ErrRunning) {
		t.Errorf("after Status, a second start: %v", err)
	}

	// A killed proxy: its lock is gone with it, its files stay.
	if err := r.lock.Unlock(); err != nil {
		t.Fatal(err)
	}
	rep, err = Status(dir)
	if err != nil || rep.Running || !rep.Stale || rep.State == nil || rep.State.PID != os.Getpid() {
		t.Errorf("stale: %+v %v", rep, err)
	}

	r2, err := Start(ctx, dir)
	if err != nil {
		t.Fatalf("a start over a stale state: %v", err)
	}
	if err := r2.Stop(); err != nil {
		t.Fatal(err)
	}
	if rep, err := Status(dir); err != nil || rep.Running || rep.Stale {
		t.Errorf("after a clean stop: %+v %v", rep, err)
	}
}

// TestNoSecretInState: state.json holds the fields it names and nothing
// else: not the local secret, nor a credential the proxy holds.
func TestNoSecretInState(t *testing.T) {
	dir := newDir(t)
	r, err := Start(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Stop() }()
	secret, err := r.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Write(&State{Address: "127.0.0.1:1", Contexts: map[string]Context{"s": {Context: "c", Server: "https://x", State: "needs-person", Problem: "log in"}}}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, StateFile))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, secret) {
		t.Error("state.json holds the local secret")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	for k := range fields {
		switch k {
		case "pid", "address", "started", "contexts":
		default:
			t.Errorf("state.json has a field %q", k)
		}
	}
	var ctxs map[string]map[string]json.RawMessage
	if err := json.Unmarshal(fields["contexts"], &ctxs); err != nil {
		t.Fatal(err)
	}
	for k := range ctxs["s"] {
		switch k {
		case "context", "server", "expires", "renewals", "state", "problem":
		default:
			t.Errorf("a context in state.json has a field %q", k)
		}
	}
}

func TestLinksAreRefused(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("links are Unix's here")
	}
	ctx := context.Background()
	// The directory itself a link: refused to start, to look, to read.
	real := t.TempDir()
	if err := os.Chmod(real, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "proxy")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(ctx, link); !errors.Is(err, privatedir.ErrNotPrivate) {
		t.Errorf("start in a link: %v", err)
	}
	if _, err := Status(link); !errors.Is(err, privatedir.ErrNotPrivate) {
		t.Errorf("status of a link: %v", err)
	}

	// A link planted for the secret: not followed to read, nor to write.
	dir := newDir(t)
	r, err := Start(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Stop() }()
	target := filepath.Join(t.TempDir(), "theirs")
	if err := os.WriteFile(target, []byte("planted"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, SecretFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSecret(dir); !errors.Is(err, privatedir.ErrNotPrivate) {
		t.Errorf("a linked secret read: %v", err)
	}
	if _, err := r.NewSecret(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "planted" {
		t.Error("the new secret was written through the link")
	}
	// A state directory others may enter is refused when looked at.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Status(dir); !errors.Is(err, privatedir.ErrNotPrivate) {
		t.Errorf("status of an open directory: %v", err)
	}
}

// TestAKilledProxysSecretIsNotHandedOut: a proxy that was killed left its
// secret file. Once a new proxy holds the lock, and until it has written
// its own secret, RunningSecret must not hand out the dead one's.
func TestAKilledProxysSecretIsNotHandedOut(t *testing.T) {
	dir := newDir(t)
	if err := Prepare(dir); err != nil {
		t.Fatal(err)
	}
	if err := privatedir.WriteFile(dir, SecretFile, []byte("left-by-a-killed-proxy")); err != nil {
		t.Fatal(err)
	}
	r, err := Start(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Stop() }()
	if s, err := RunningSecret(dir); !errors.Is(err, ErrStarting) {
		t.Errorf("between Start and NewSecret: %q, %v; want ErrStarting", s, err)
	}
}
