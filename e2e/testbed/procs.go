package testbed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
)

// A pidRecord identifies a process we started: the PID plus the process's start time (field 22
// of /proc/<pid>/stat), so that a reused PID is never mistaken for ours.
type pidRecord struct {
	PID   int
	Start string
}

func procStartTime(pid int) (string, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	// The command name (field 2) may contain spaces; fields after it are fixed.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return "", fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	// f[0] is field 3 (state); start time is field 22.
	if f[0] == "Z" {
		return "", errors.New("zombie")
	}
	return f[19], nil
}

// alive reports whether the recorded process still runs (zombies count as dead).
func (r pidRecord) alive() bool {
	st, err := procStartTime(r.PID)
	return err == nil && st == r.Start
}

func (b *Bed) pidFile(name string) string { return filepath.Join(b.cfg.PIDDir(), name+".pid") }

func (b *Bed) readPID(name string) (pidRecord, bool) {
	raw, err := os.ReadFile(b.pidFile(name))
	if err != nil {
		return pidRecord{}, false
	}
	f := strings.Fields(string(raw))
	if len(f) != 2 {
		return pidRecord{}, false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 1 {
		return pidRecord{}, false
	}
	return pidRecord{PID: pid, Start: f[1]}, true
}

// start runs a daemon in its own session (so a Ctrl-C in the terminal that ran "up" does not
// reach it), with output appended to logs/<name>.log, and records its PID.
func (b *Bed) start(name string, env []string, bin string, args ...string) error {
	logf, err := os.OpenFile(b.cfg.LogFile(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "==> %s %s %s\n", time.Now().Format(time.RFC3339), bin, strings.Join(args, " "))
	// Not tied to a context: the daemon must outlive this call (and this process).
	cmd := exec.CommandContext(context.Background(), bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(cleanEnv(), env...)
	cmd.Dir = b.cfg.StateDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	pid := cmd.Process.Pid
	// Reap it if it exits while we still run; after we exit, init does.
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	st, err := procStartTime(pid)
	if err != nil {
		return fmt.Errorf("%s exited immediately; see %s", name, b.cfg.LogFile(name))
	}
	b.exited[name] = exited
	if err := os.WriteFile(b.pidFile(name), []byte(fmt.Sprintf("%d %s\n", pid, st)), 0o600); err != nil {
		return err
	}
	raw, _ := json.Marshal(launch{Env: env, Bin: bin, Args: args})
	return os.WriteFile(b.launchFile(name), raw, 0o600)
}

// launch is how a daemon was started, kept so that a test which stops it
// (a fault it injects) can start it again exactly so.
type launch struct {
	Env  []string
	Bin  string
	Args []string
}

func (b *Bed) launchFile(name string) string {
	return filepath.Join(b.cfg.PIDDir(), name+".launch.json")
}

// Stop stops one of the bed's daemons (SIGTERM, SIGKILL after grace; a
// grace of 0 is an outright SIGKILL), as a fault a test injects. Start
// brings it back.
func (b *Bed) Stop(name string, grace time.Duration) error {
	if _, err := os.Stat(b.launchFile(name)); err != nil {
		return fmt.Errorf("the bed has no daemon %q it could start again: %w", name, err)
	}
	b.stop(name, grace)
	return nil
}

// Revive starts again, as Up did, every daemon of the bed that has exited
// (a fault can take others down with it: kube-scheduler and
// kube-controller-manager exit when they cannot renew their leases while
// kube-apiserver is away). It names those it started.
func (b *Bed) Revive() ([]string, error) {
	return b.startStopped()
}

// startStopped starts every daemon of the bed that is not running, in the
// order Up starts them; after kube-apiserver, it waits until the API
// server is ready, as a node's service manager orders them: controllers
// started against an API server still bootstrapping its RBAC would be
// refused and exit.
func (b *Bed) startStopped() ([]string, error) {
	var started []string
	for _, d := range daemons {
		if _, err := os.Stat(b.launchFile(d)); err != nil || b.running(d) {
			continue
		}
		if err := b.Start(d); err != nil {
			return started, err
		}
		started = append(started, d)
		if d != "kube-apiserver" {
			continue
		}
		rc, err := b.RESTConfig()
		if err != nil {
			return started, err
		}
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return started, err
		}
		if err := b.waitFor(context.Background(), "kube-apiserver /readyz", "kube-apiserver", 60*time.Second, func(ctx context.Context) error {
			_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			return err
		}); err != nil {
			return started, err
		}
	}
	return started, nil
}

// Reboot does to the bed what a power cycle does to a node: every daemon
// and every container process killed at once, the volatile state gone (on
// a node it lives in /run: containerd's state directory with its mounts,
// pods' tmpfs volumes), then every daemon started again as Up started it.
// What a disk keeps stays: etcd's data, containerd's images and metadata,
// kubelet's checkpoints. Whether the cluster serves again is for the
// caller to wait for.
func (b *Bed) Reboot() error {
	var recs []pidRecord
	for _, d := range daemons {
		if r, ok := b.readPID(d); ok && r.alive() {
			recs = append(recs, r)
			_ = syscall.Kill(r.PID, syscall.SIGKILL)
		}
	}
	killStragglers(b.cfg)
	for _, r := range recs {
		for i := 0; i < 100 && r.alive(); i++ {
			time.Sleep(50 * time.Millisecond)
		}
		if r.alive() {
			return fmt.Errorf("process %d survived SIGKILL", r.PID)
		}
	}
	for _, d := range daemons {
		_ = os.Remove(b.pidFile(d))
	}
	state := b.cfg.path("containerd", "state")
	if err := errors.Join(unmountUnder(state), unmountUnder(b.cfg.KubeletRootDir())); err != nil {
		return err
	}
	if err := os.RemoveAll(state); err != nil {
		return fmt.Errorf("clear containerd's state as a reboot would: %w", err)
	}
	if _, err := b.startStopped(); err != nil {
		return fmt.Errorf("after the reboot: %w", err)
	}
	return nil
}

// Start starts a daemon that Stop stopped, as Up started it, and waits
// until it has not exited for a moment; whether it serves is for the
// caller to wait for. A daemon still running is left as it is.
func (b *Bed) Start(name string) error {
	if b.running(name) {
		return nil
	}
	raw, err := os.ReadFile(b.launchFile(name))
	if err != nil {
		return fmt.Errorf("how %s was started is not recorded: %w", name, err)
	}
	var l launch
	if err := json.Unmarshal(raw, &l); err != nil {
		return fmt.Errorf("%s: %w", b.launchFile(name), err)
	}
	if err := b.start(name, l.Env, l.Bin, l.Args...); err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond)
	if !b.running(name) {
		return fmt.Errorf("%s exited right after starting again; see %s:\n%s", name, b.cfg.LogFile(name), tail(b.cfg.LogFile(name), 15))
	}
	return nil
}

// StartWithEnv starts a stopped daemon as Start does, with env added for
// this run only: its launch record is kept, so a later Start or Revive
// starts it as Up did.
func (b *Bed) StartWithEnv(name string, env ...string) error {
	if b.running(name) {
		return fmt.Errorf("%s is running; stop it first", name)
	}
	raw, err := os.ReadFile(b.launchFile(name))
	if err != nil {
		return fmt.Errorf("how %s was started is not recorded: %w", name, err)
	}
	var l launch
	if err := json.Unmarshal(raw, &l); err != nil {
		return fmt.Errorf("%s: %w", b.launchFile(name), err)
	}
	startErr := b.start(name, append(slices.Clone(l.Env), env...), l.Bin, l.Args...)
	if err := os.WriteFile(b.launchFile(name), raw, 0o600); err != nil { //nolint:gosec // G703: a file under the bed's own state dir
		return err
	}
	if startErr != nil {
		return startErr
	}
	time.Sleep(200 * time.Millisecond)
	if !b.running(name) {
		return fmt.Errorf("%s exited right after starting; see %s:\n%s", name, b.cfg.LogFile(name), tail(b.cfg.LogFile(name), 15))
	}
	return nil
}

// cleanEnv is our environment minus variables that would change how daemons behave:
// etcd reads every ETCD_* variable as a flag, and KUBECONFIG would be picked up by some.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "ETCD_") || strings.HasPrefix(kv, "KUBECONFIG=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// PID is the named daemon's process ID, if it runs (benchmarks read its
// CPU time and memory from /proc).
func (b *Bed) PID(name string) (int, bool) {
	r, ok := b.readPID(name)
	if !ok || !r.alive() {
		return 0, false
	}
	return r.PID, true
}

// running reports whether the named daemon is alive.
func (b *Bed) running(name string) bool {
	r, ok := b.readPID(name)
	return ok && r.alive()
}

// stop sends SIGTERM to the named daemon, then SIGKILL after grace, and waits for it to go.
func (b *Bed) stop(name string, grace time.Duration) {
	r, ok := b.readPID(name)
	if !ok {
		return
	}
	defer os.Remove(b.pidFile(name))
	if !r.alive() {
		return
	}
	stopPID(r, grace)
}

func stopPID(r pidRecord, grace time.Duration) {
	_ = syscall.Kill(r.PID, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for r.alive() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if r.alive() {
		_ = syscall.Kill(r.PID, syscall.SIGKILL)
		for i := 0; i < 100 && r.alive(); i++ {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// waitFor polls check until it returns nil, the daemon dies, or the timeout passes. Errors
// say what was awaited and which log to read.
func (b *Bed) waitFor(ctx context.Context, what, daemon string, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		if daemon != "" && !b.running(daemon) {
			return fmt.Errorf("%s: %s exited; see %s:\n%s", what, daemon, b.cfg.LogFile(daemon), tail(b.cfg.LogFile(daemon), 15))
		}
		select {
		case <-ctx.Done():
			hint := ""
			if daemon != "" {
				hint = fmt.Sprintf("; see %s", b.cfg.LogFile(daemon))
			}
			return fmt.Errorf("%s: not ready after %s (last error: %w)%s", what, timeout, last, hint)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tail returns the last n lines of a file, indented, for error messages.
func tail(path string, n int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "    (no log: " + err.Error() + ")"
	}
	lines := bytes.Split(bytes.TrimRight(raw, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + string(bytes.Join(lines, []byte("\n    ")))
}

// ip runs the ip(8) command and returns a useful error with its output.
func ip(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
