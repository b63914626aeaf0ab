package testbed

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The few things on the host that a bed cannot keep inside its state directory or network
// namespace. They are recorded at Up and restored at Down.

// Global (not per-namespace) sysctls that kubelet sets at start.
var kubeletSysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

// Host paths kubelet and containerd write no matter how they are configured.
// (/var/lib/cni holds libcni's result cache, which containerd's CRI plugin does not move.)
var hostPaths = []string{"/var/lib/kubelet", "/var/log/containers", "/run/containerd", "/var/lib/cni"}

func (c Config) sysctlFile() string    { return c.path("host-sysctls.json") }
func (c Config) hostPathsFile() string { return c.path("host-paths.json") }

// recordHostState remembers which host paths already existed, so Down removes only what the
// bed created (and only when no other bed still runs).
func recordHostState(cfg Config) error {
	unlock, err := hostLock()
	if err != nil {
		return err
	}
	defer unlock()
	existed := map[string]bool{}
	for _, p := range hostPaths {
		_, err := os.Stat(p)
		existed[p] = err == nil
	}
	// If another bed runs, it may have created them: inherit its record, so that whichever
	// bed goes down last removes them.
	for _, dir := range otherLiveBeds(cfg) {
		if raw, err := os.ReadFile(filepath.Join(dir, "host-paths.json")); err == nil {
			var other map[string]bool
			if json.Unmarshal(raw, &other) == nil {
				existed = other
				break
			}
		}
	}
	raw, _ := json.Marshal(existed)
	if err := os.WriteFile(cfg.hostPathsFile(), raw, 0o600); err != nil {
		return err
	}
	// The sysctls too, now: by the time this bed's kubelet starts, another
	// bed's kubelet may have changed them and already handed its record over.
	return recordSysctls(cfg)
}

// saveSysctls records the global sysctls kubelet is about to change, unless
// the bed already holds a record (from its Up, or from before a restart of
// its node, when the values are its own kubelet's).
func saveSysctls(cfg Config) error {
	unlock, err := hostLock()
	if err != nil {
		return err
	}
	defer unlock()
	return recordSysctls(cfg)
}

// recordSysctls is saveSysctls with the host lock held.
func recordSysctls(cfg Config) error {
	if _, err := os.Stat(cfg.sysctlFile()); err == nil {
		return nil
	}
	vals := map[string]string{}
	for _, s := range kubeletSysctls {
		raw, err := os.ReadFile("/proc/sys/" + s)
		if err == nil {
			vals[s] = strings.TrimSpace(string(raw))
		}
	}
	// A second bed started while another runs would record the first kubelet's values;
	// reuse the first bed's record instead.
	if other := otherBedSysctls(cfg); other != nil {
		vals = other
	}
	raw, _ := json.Marshal(vals)
	return os.WriteFile(cfg.sysctlFile(), raw, 0o600)
}

func otherBedSysctls(cfg Config) map[string]string {
	for _, dir := range otherLiveBeds(cfg) {
		raw, err := os.ReadFile(filepath.Join(dir, "host-sysctls.json"))
		if err != nil {
			continue
		}
		var vals map[string]string
		if json.Unmarshal(raw, &vals) == nil {
			return vals
		}
	}
	return nil
}

// otherLiveBeds returns the state dirs of other beds (siblings of ours) that
// still need the host state: their kubelet runs, or they hold a record of
// it and a test run holds their lock. The lock counts because a live bed's
// kubelet is down for a while at times (its node restarted by a test), and
// the two e2e profiles' beds run at once: tearing the shared state down
// under such a bed would break it. A bed gives its record up at its Down
// (under the host lock), so two beds going down together never both leave
// the state to the other.
func otherLiveBeds(cfg Config) []string {
	var out []string
	entries, _ := os.ReadDir(filepath.Dir(cfg.StateDir))
	for _, e := range entries {
		dir := filepath.Join(filepath.Dir(cfg.StateDir), e.Name())
		if dir == cfg.StateDir || e.Name() == cfg.Name || !e.IsDir() {
			continue
		}
		other := &Bed{cfg: Config{StateDir: dir}}
		if other.running("kubelet") || (hasHostRecord(dir) && bedLockHeld(e.Name())) {
			out = append(out, dir)
		}
	}
	return out
}

func hasHostRecord(dir string) bool {
	for _, f := range []string{"host-paths.json", "host-sysctls.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return true
		}
	}
	return false
}

// hostLock serializes what beds do to the host's shared state: recording
// it, and giving it back. (Its name has a dot, which no bed's name has, so
// it is never a bed's lock.)
func hostLock() (func(), error) {
	if err := os.MkdirAll("/run/lock", 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile("/run/lock/pinniped-e2e.host.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the host state lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock the host state: %w", err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); _ = f.Close() }, nil
}

// restoreHostState gives the host back what the bed changed (global
// sysctls, host paths it created), unless another bed still needs them; it
// then restores them at its own Down. The bed's record goes either way.
func restoreHostState(cfg Config) error {
	unlock, err := hostLock()
	if err != nil {
		return err
	}
	defer unlock()
	sysctls, sysErr := os.ReadFile(cfg.sysctlFile())
	paths, pathErr := os.ReadFile(cfg.hostPathsFile())
	for _, f := range []string{cfg.sysctlFile(), cfg.hostPathsFile()} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if len(otherLiveBeds(cfg)) > 0 {
		return nil
	}
	var errs []error
	switch {
	case errors.Is(sysErr, fs.ErrNotExist): // kubelet never started
	case sysErr != nil:
		errs = append(errs, sysErr)
	default:
		errs = append(errs, restoreSysctls(sysctls))
	}
	switch {
	case errors.Is(pathErr, fs.ErrNotExist):
	case pathErr != nil:
		errs = append(errs, pathErr)
	default:
		errs = append(errs, cleanupHostPaths(paths))
	}
	return errors.Join(errs...)
}

func restoreSysctls(record []byte) error {
	var vals map[string]string
	if err := json.Unmarshal(record, &vals); err != nil {
		return err
	}
	var errs []error
	for k, v := range vals {
		if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore sysctl %s=%s: %w", k, v, err))
		}
	}
	return errors.Join(errs...)
}

func cleanupHostPaths(record []byte) error {
	var existed map[string]bool
	if err := json.Unmarshal(record, &existed); err != nil {
		return err
	}
	var errs []error
	for _, p := range hostPaths {
		if !existed[p] {
			if err := os.RemoveAll(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// cgroup v1 hierarchies (or the v2 root) under which the bed's cgroup root is created.
func cgroupHierarchies() []string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return []string{"/sys/fs/cgroup"} // unified (v2)
	}
	var out []string
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() { // skip cpu -> cpu,cpuacct links
			out = append(out, p)
		}
	}
	return out
}

// makeCgroupRoot creates the kubelet's cgroup root in every hierarchy: kubelet requires it
// to exist, and a private root keeps two beds' kubelets from reaping each other's pods.
func makeCgroupRoot(cfg Config) error {
	for _, h := range cgroupHierarchies() {
		dir := filepath.Join(h, cfg.CgroupRoot())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		// A new v1 cpuset cgroup starts with no CPUs and no memory nodes.
		if strings.HasSuffix(h, "/cpuset") {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil { //nolint:gosec // G703: a cgroupfs path we built
					return fmt.Errorf("init %s/%s: %w", dir, f, err)
				}
			}
		}
	}
	return nil
}

// cgroupProcs returns every PID in the bed's cgroup tree.
func cgroupProcs(cfg Config) []int {
	seen := map[int]bool{}
	for _, h := range cgroupHierarchies() {
		root := filepath.Join(h, cfg.CgroupRoot())
		_ = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err != nil || fi.IsDir() || fi.Name() != "cgroup.procs" {
				return nil //nolint:nilerr // a cgroup that vanished while walking has no processes
			}
			raw, _ := os.ReadFile(p) //nolint:gosec // G122: cgroupfs has no symlinks
			for _, f := range strings.Fields(string(raw)) {
				if pid, err := strconv.Atoi(f); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	var out []int
	for pid := range seen {
		out = append(out, pid)
	}
	return out
}

// removeCgroupRoot removes the bed's cgroups, deepest first.
func removeCgroupRoot(cfg Config) error {
	var errs []error
	for _, h := range cgroupHierarchies() {
		root := filepath.Join(h, cfg.CgroupRoot())
		var dirs []string
		_ = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			var err error
			for i := 0; i < 20; i++ { // a just-killed process may linger for a moment
				if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// killStragglers kills, by PID, what can outlive the daemons: containerd shims of our
// containerd (they run in their own session and name our socket in their command line) and
// any process left in the bed's cgroup tree.
func killStragglers(cfg Config) {
	sock := cfg.ContainerdSocket()
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		if len(args) > 0 && strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") && strings.Contains(string(raw), sock) {
			pids = append(pids, pid)
		}
	}
	pids = append(pids, cgroupProcs(cfg)...)
	for _, pid := range pids {
		st, err := procStartTime(pid)
		if err != nil {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		r := pidRecord{PID: pid, Start: st}
		for i := 0; i < 40 && r.alive(); i++ {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// unmountUnder detaches every mount at or below dir, deepest first (kubelet's volume tmpfs,
// containerd's overlay rootfs and shm mounts).
func unmountUnder(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			mounts = append(mounts, mp)
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	var errs []error
	for _, m := range mounts {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

func unescapeMount(s string) string {
	// mountinfo escapes space, tab, newline and backslash as octal.
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// runningTasks counts the running containers (sandboxes included) of our containerd.
func runningTasks(cfg Config) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ctr", "--address", cfg.ContainerdSocket(), "-n", "k8s.io", "tasks", "ls", "-q").Output()
	if err != nil {
		return 0
	}
	return len(strings.Fields(string(out)))
}
