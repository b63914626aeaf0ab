//go:build e2e

package e2e

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// What a request costs the servers that answer it: CPU time read from the
// servers' cgroups (a pod's container) or from /proc (a host daemon such as
// the bed's kube-apiserver, which shares its cgroup with the harness), and
// resident memory from /proc. Comparable between implementations measured
// on the same machine in the same run, unlike latency on two shared cores.

// server is one thing whose costs are read.
type server struct {
	name string
	// procs are its processes: one per pod container, or the daemon.
	procs []int
	// cgroups are the CPU accounting files to sum (empty: sum procs'
	// utime+stime instead).
	cgroups []string
}

// podServer is every container process of the pods in namespace matching
// selector (all pods if empty) that runs on this machine. kubectlArgs
// select the cluster (e.g. --kubeconfig).
func podServer(t *testing.T, name, namespace, selector string, kubectlArgs ...string) server {
	t.Helper()
	// Pods being deleted still say Running; their processes are about to go.
	args := append(append([]string{}, kubectlArgs...), "-n", namespace, "get", "pods", "--field-selector=status.phase=Running",
		"-o", "jsonpath={range .items[*]}{.metadata.uid} {.metadata.deletionTimestamp}{\"\\n\"}{end}")
	if selector != "" {
		args = append(args, "-l", selector)
	}
	s := server{name: name}
	seen := map[string]bool{}
	complete := true
	for _, line := range strings.Split(Kubectl(t, args...), "\n") {
		f := strings.Fields(line)
		if len(f) != 1 {
			continue // none, or being deleted
		}
		for _, pid := range podProcesses(f[0]) {
			s.procs = append(s.procs, pid)
			cg := cpuCgroupFile(pid)
			if cg == "" {
				complete = false
			} else if !seen[cg] { // a container's processes share its cgroup
				seen[cg] = true
				s.cgroups = append(s.cgroups, cg)
			}
		}
	}
	if !complete {
		s.cgroups = nil // not every one is readable: count all the same way
	}
	return s
}

// daemonServer is one of the bed's host processes.
func daemonServer(t *testing.T, daemon string) server {
	t.Helper()
	pid, ok := Bed.PID(daemon)
	if !ok {
		t.Fatalf("the bed's %s is not running", daemon)
	}
	return server{name: daemon, procs: []int{pid}}
}

// podProcesses are the processes in the pod with this UID, less the pause
// container's.
func podProcesses(uid string) []int {
	var out []int
	underscored := strings.ReplaceAll(uid, "-", "_") // the systemd cgroup driver's spelling
	procs, _ := filepath.Glob("/proc/[0-9]*/cgroup")
	for _, cg := range procs {
		raw, err := os.ReadFile(cg)
		if err != nil || (!strings.Contains(string(raw), uid) && !strings.Contains(string(raw), underscored)) {
			continue
		}
		dir := filepath.Dir(cg)
		if comm, _ := os.ReadFile(filepath.Join(dir, "comm")); strings.TrimSpace(string(comm)) == "pause" {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(dir)); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// cpuCgroupFile is the file holding the cumulative CPU time of pid's
// cgroup: cpu.stat on cgroup v2, cpuacct.usage on v1.
func cpuCgroupFile(pid int) string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			if p := filepath.Join("/sys/fs/cgroup", f[2], "cpu.stat"); exists(p) {
				return p
			}
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			if c != "cpuacct" {
				continue
			}
			for _, mount := range []string{"cpuacct", "cpu,cpuacct", "cpuacct,cpu"} {
				if p := filepath.Join("/sys/fs/cgroup", mount, f[2], "cpuacct.usage"); exists(p) {
					return p
				}
			}
		}
	}
	return ""
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// cpu is the CPU time the server has used so far.
func (s server) cpu() (time.Duration, error) {
	var total time.Duration
	if len(s.cgroups) > 0 {
		for _, f := range s.cgroups {
			d, err := readCgroupCPU(f)
			if err != nil {
				return 0, err
			}
			total += d
		}
		return total, nil
	}
	for _, pid := range s.procs {
		d, err := procCPU(pid)
		if err != nil {
			return 0, err
		}
		total += d
	}
	return total, nil
}

func readCgroupCPU(file string) (time.Duration, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	if filepath.Base(file) == "cpuacct.usage" {
		ns, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		return time.Duration(ns), err
	}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "usage_usec" {
			us, err := strconv.ParseInt(f[1], 10, 64)
			return time.Duration(us) * time.Microsecond, err
		}
	}
	return 0, fmt.Errorf("%s has no usage_usec", file)
}

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// procCPU is utime+stime of one process, from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// memory is each process's resident set now and at its peak, in bytes.
func (s server) memory() (rss, peak []int64) {
	for _, pid := range s.procs {
		r, p := procMemory(pid)
		rss, peak = append(rss, r), append(peak, p)
	}
	return rss, peak
}

// procMemory is VmRSS and VmHWM of one process, in bytes (0 if gone).
func procMemory(pid int) (rss, peak int64) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	return rss, peak
}

// rssText is the servers' resident memory now, per process.
func (s server) rssText() string {
	if len(s.procs) == 0 {
		return "n/a (no process on this machine)"
	}
	rss, _ := s.memory()
	parts := make([]string, len(rss))
	for i, r := range rss {
		parts[i] = mib(r)
	}
	return strings.Join(parts, " + ")
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// clusterCAKey names the key type of the bed's cluster CA (which signs every
// certificate an exchange issues on the signing-key and CSR paths): its
// cost is most of an exchange's, so a benchmark says which it ran with.
func clusterCAKey(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(Bed.Config().ClusterCAFile())
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		t.Fatalf("%s holds no PEM certificate", Bed.Config().ClusterCAFile())
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return keyName(cert)
}

// keyName says what key a certificate's holder signs with: "RSA-2048",
// "ECDSA P-256".
func keyName(cert *x509.Certificate) string {
	switch k := cert.PublicKey.(type) {
	case *rsa.PublicKey:
		return fmt.Sprintf("RSA-%d", k.N.BitLen())
	case *ecdsa.PublicKey:
		return "ECDSA " + k.Curve.Params().Name
	}
	return cert.PublicKeyAlgorithm.String()
}
