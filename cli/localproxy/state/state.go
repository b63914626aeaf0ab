// Package state is the local credential proxy's state directory
// ($XDG_CONFIG_HOME/pinniped/proxy): the running lock, held for the
// process's life, that makes a second `pinniped proxy` fail and tells a
// running proxy from a stale state file without the network; the local
// secret clients present; and state.json, what `pinniped status` shows.
//
// The directory keeps privatedir's rule (0700, owned by this user, no
// links; files 0600, written atomically): the secret in it lets whoever
// reads it use every context the proxy serves.
package state

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pinniped-kit/pinniped/cache/lock"
	"github.com/pinniped-kit/pinniped/cache/privatedir"
)

// Files in the state directory.
const (
	SecretFile = "secret"
	StateFile  = "state.json"
)

// lockKey names the running lock (a hash of it names the file).
const lockKey = "proxy"

// startWait is how long Start waits for the running lock: a `pinniped
// status` holds it for a moment to look, a running proxy for its life.
const startWait = 2 * time.Second

// DefaultDir is <config dir>/proxy: $XDG_CONFIG_HOME/pinniped/proxy, else
// ~/.config/pinniped/proxy.
func DefaultDir(configDir string) string { return filepath.Join(configDir, "proxy") }

// Prepare creates dir (0700) when missing, tightens one of this user's
// that others may enter, and refuses anything else (privatedir's rule).
func Prepare(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create the proxy's state directory: %w", err)
	}
	if err := privatedir.Tighten(dir); err != nil {
		return fmt.Errorf("the proxy's state directory: %w", err)
	}
	return nil
}

// Context is what state.json says about one served context. It holds no
// identity (no username, group or claim), no secret and no token.
type Context struct {
	Context string `json:"context"`
	Server  string `json:"server"`
	// Expires is the current credential's expiry (zero: none yet).
	Expires  time.Time `json:"expires,omitzero"`
	Renewals int       `json:"renewals"`
	// State is the renewal's state (ready, renewing, needs-person, failed).
	State string `json:"state"`
	// Problem is the last renewal's failure, as the renewer words it.
	Problem string `json:"problem,omitempty"`
}

// State is state.json.
type State struct {
	PID     int       `json:"pid"`
	Address string    `json:"address"`
	Started time.Time `json:"started"`
	// Contexts are by slug.
	Contexts map[string]Context `json:"contexts"`
}

// ErrRunning is in Start's error when another proxy holds the directory.
var ErrRunning = errors.New("pinniped proxy is already running")

// Running is the state directory of the running proxy: it holds the
// running lock until Stop (or the process's end: the kernel drops the lock
// of a process that dies).
type Running struct {
	dir     string
	lock    *lock.Lock
	pid     int
	started time.Time

	mu      sync.Mutex
	stopped bool
}

// Start prepares dir, takes its running lock and writes a first
// state.json (this process's pid), so that another start can name it. A
// running proxy is an error with ErrRunning and its pid.
func Start(ctx context.Context, dir string) (*Running, error) {
	if err := Prepare(dir); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, startWait)
	defer cancel()
	l, err := lock.Acquire(ctx, dir, lockKey)
	if errors.Is(err, lock.ErrBusy) {
		return nil, fmt.Errorf("%w (%s): stop it first, or use it (pinniped status shows its address)", ErrRunning, pidOf(dir))
	}
	if err != nil {
		return nil, fmt.Errorf("the proxy's running lock: %w", err)
	}
	// A proxy that was killed left its secret: until NewSecret, clients
	// must hear "starting", not get a secret no proxy accepts.
	if err := privatedir.Remove(dir, SecretFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		_ = l.Unlock()
		return nil, fmt.Errorf("remove the secret a stopped proxy left: %w", err)
	}
	r := &Running{dir: dir, lock: l, pid: os.Getpid(), started: time.Now()}
	if err := r.Write(&State{}); err != nil {
		_ = l.Unlock()
		return nil, err
	}
	return r, nil
}

// pidOf names the running proxy's pid from its state.json, for a message.
func pidOf(dir string) string {
	s, err := Read(dir)
	if err != nil || s.PID == 0 {
		return "pid unknown"
	}
	return fmt.Sprintf("pid %d", s.PID)
}

// Dir is the state directory.
func (r *Running) Dir() string { return r.dir }

// NewSecret makes this start's local secret, 32 random bytes as text
// (base64url, what a client sends as its bearer token), and writes it to
// the secret file (0600). A new one each start: a client that still holds
// the last one gets a 401 and, as an exec plugin client, asks again.
func (r *Running) NewSecret() ([]byte, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("make the proxy's local secret: %w", err)
	}
	secret := []byte(base64.RawURLEncoding.EncodeToString(b))
	if err := privatedir.WriteFile(r.dir, SecretFile, secret); err != nil {
		return nil, fmt.Errorf("write %s: %w", filepath.Join(r.dir, SecretFile), err)
	}
	return secret, nil
}

// Write replaces state.json with s, atomically. PID and Started are this
// process's, whatever s says.
func (r *Running) Write(s *State) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return errors.New("the proxy has stopped: its state is no longer written")
	}
	out := *s
	out.PID, out.Started = r.pid, r.started
	if out.Contexts == nil {
		out.Contexts = map[string]Context{}
	}
	b, err := json.MarshalIndent(&out, "", "  ")
	if err != nil {
		return err
	}
	if err := privatedir.WriteFile(r.dir, StateFile, append(b, '\n')); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(r.dir, StateFile), err)
	}
	return nil
}

// Stop removes the secret and state.json, then releases the running lock:
// a proxy that stopped cleanly leaves nothing stale.
func (r *Running) Stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return nil
	}
	r.stopped = true
	var errs []error
	for _, name := range []string{SecretFile, StateFile} {
		if err := privatedir.Remove(r.dir, name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := r.lock.Unlock(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Read reads state.json; a missing one is fs.ErrNotExist.
func Read(dir string) (*State, error) {
	b, err := privatedir.ReadFile(dir, StateFile)
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s is not valid: %w", filepath.Join(dir, StateFile), err)
	}
	return &s, nil
}

// ReadSecret reads the running proxy's local secret.
func ReadSecret(dir string) ([]byte, error) {
	return privatedir.ReadFile(dir, SecretFile)
}

// Report is what Status finds.
type Report struct {
	// Running: a proxy holds the running lock.
	Running bool
	// Stale: no proxy runs, but one left its state.json (it was killed,
	// or crashed).
	Stale bool
	// State is state.json's content, when there is one that reads.
	State *State
}

// Status tells a running proxy from a stale state file, without the
// network: the running lock is held exactly while a proxy runs. It takes
// the lock for a moment when it is free, and never makes dir.
func Status(dir string) (Report, error) {
	if err := privatedir.Check(dir); errors.Is(err, fs.ErrNotExist) {
		return Report{}, nil
	} else if err != nil {
		return Report{}, fmt.Errorf("the proxy's state directory: %w", err)
	}
	s, err := Read(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Report{}, err
	}
	// A running proxy always holds the lock: no wait, which would only
	// add its length to every kubectl call through the proxy.
	l, lerr := lock.TryAcquire(dir, lockKey)
	switch {
	case errors.Is(lerr, lock.ErrBusy):
		return Report{Running: true, State: s}, nil
	case lerr != nil:
		return Report{}, fmt.Errorf("the proxy's running lock: %w", lerr)
	}
	_ = l.Unlock()
	return Report{Stale: s != nil, State: s}, nil
}

// ErrNotRunning is RunningSecret's error when no proxy holds dir.
var ErrNotRunning = errors.New("pinniped proxy is not running: start it with `pinniped proxy` in a terminal")

// ErrStarting is RunningSecret's error when a proxy holds dir but has not
// written its secret yet.
var ErrStarting = errors.New("pinniped proxy is starting: try again in a moment")

// RunningSecret is the local secret of the proxy running in dir: what its
// kubeconfig's exec entry prints. No proxy running is ErrNotRunning: a
// secret left by one that was killed is never handed out.
func RunningSecret(dir string) ([]byte, error) {
	rep, err := Status(dir)
	if err != nil {
		return nil, err
	}
	if !rep.Running {
		return nil, ErrNotRunning
	}
	secret, err := ReadSecret(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrStarting
	}
	if err != nil {
		return nil, fmt.Errorf("read the pinniped proxy's local secret: %w", err)
	}
	return secret, nil
}
