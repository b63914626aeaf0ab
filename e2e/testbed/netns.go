package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// Names of the links the bed creates inside its own namespace (so they never clash with
// another bed's or the host's).
const (
	nodeBridge = "pbr0"  // carries the node IP; no ports: there is no dummy driver on the VM
	podBridge  = "pcni0" // created by the bridge CNI plugin
)

// CheckHost reports, with a clear message, why this machine cannot host a bed.
func CheckHost() error {
	if os.Geteuid() != 0 {
		return errors.New("the e2e test bed must run as root (it creates a network namespace, bridges, cgroups and runs kubelet)")
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		return fmt.Errorf("no network namespace support in this kernel: %w", err)
	}
	var missing []string
	for _, tool := range []string{"ip", "nsenter", "iptables", "conntrack", "containerd", "runc", "ctr", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	for _, f := range []string{"/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/loopback"} {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing host tools %v: run e2e/scripts/install-deps.sh", missing)
	}
	return nil
}

// EnsureNetNS creates the bed's network namespace if it does not exist. We create it with
// "ip netns add" but never enter it with "ip netns exec", which remounts /sys and hides the
// cgroup hierarchy from kubelet; use nsenter --net= instead (see Reexec).
func EnsureNetNS(cfg Config) error {
	if _, err := os.Stat(cfg.NetNSPath()); err == nil {
		return nil
	}
	if err := ip("netns", "add", cfg.NetNS()); err != nil {
		return fmt.Errorf("create network namespace: %w", err)
	}
	return nil
}

// InNetNS reports whether the calling process runs inside the bed's network namespace.
func InNetNS(cfg Config) bool {
	var self, bed syscall.Stat_t
	if syscall.Stat("/proc/self/ns/net", &self) != nil || syscall.Stat(cfg.NetNSPath(), &bed) != nil {
		return false
	}
	return self.Dev == bed.Dev && self.Ino == bed.Ino
}

// NetNSCommand returns a command that runs argv inside the bed's network namespace.
func NetNSCommand(cfg Config, argv ...string) *exec.Cmd {
	// Running the caller's argv is the point of this function.
	return exec.CommandContext(context.Background(), "nsenter", append([]string{"--net=" + cfg.NetNSPath(), "--"}, argv...)...) //nolint:gosec // G702: argv comes from the caller by design
}

// Reexec runs this same program with the same arguments inside the bed's network namespace,
// with stdio passed through and extra environment added, and returns its exit code.
// wrap, if non-empty, is put between nsenter and the program (e.g. dbus-run-session --).
func Reexec(cfg Config, extraEnv []string, wrap ...string) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 1, err
	}
	argv := append(append(append([]string{}, wrap...), self), os.Args[1:]...)
	cmd := NetNSCommand(cfg, argv...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), extraEnv...)
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return 1, err
	}
	return 0, nil
}

// setupNetwork configures the namespace the caller runs in: loopback, the node bridge with
// the node IP, and routes that keep ClusterIPs and LoadBalancer IPs on that bridge so that
// kube-proxy's DNAT rules catch them and nothing ever needs to leave the namespace.
func setupNetwork(cfg Config) error {
	// A namespace kept from a bed whose state directory was removed by hand still has the
	// bridge: start from scratch.
	_ = ip("link", "delete", nodeBridge)
	steps := [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", nodeBridge, "type", "bridge"},
		{"link", "set", nodeBridge, "up"},
		{"addr", "add", cfg.NodeIP + "/32", "dev", nodeBridge},
		{"route", "add", cfg.ServiceCIDR, "dev", nodeBridge, "src", cfg.NodeIP},
		{"route", "add", cfg.LBRange, "dev", nodeBridge, "src", cfg.NodeIP},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return fmt.Errorf("set up the bed's network: %w", err)
		}
	}
	return nil
}

// deleteNetNS removes the namespace's name; the kernel frees it (and every link, route and
// iptables rule in it) once the last process inside has gone.
func deleteNetNS(cfg Config) error {
	if _, err := os.Stat(cfg.NetNSPath()); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return ip("netns", "delete", cfg.NetNS())
}

// LockBed takes the bed's exclusive lock (a flock on /run/lock/pinniped-e2e-<name>.lock,
// outside the state directory that Down removes) and returns its release. Test runs and
// `testbed up/down` hold it for their whole duration, so two people (or CI jobs) using the same
// bed name on one machine take turns instead of tearing the bed down under each other.
// The lock is released when the process exits, however it exits.
func LockBed(cfg Config, log io.Writer) (func(), error) {
	if err := os.MkdirAll("/run/lock", 0o755); err != nil {
		return nil, err
	}
	path := bedLockPath(cfg.Name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open bed lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if log != nil {
			fmt.Fprintf(log, "testbed: bed %q is in use by another test run or testbed command; waiting for %s\n", cfg.Name, path)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); _ = f.Close() }, nil
}

func bedLockPath(name string) string { return filepath.Join("/run/lock", "pinniped-e2e-"+name+".lock") }

// bedLockHeld says whether a test run or testbed command holds the lock of
// the bed named name (a bed's state directory is named after the bed).
func bedLockHeld(name string) bool {
	f, err := os.Open(bedLockPath(name))
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
