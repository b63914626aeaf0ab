//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSoak runs the mixed load of the fault tests (kubectl calls through
// the exec plugin, each an exchange, through the impersonation proxy on
// the managed profile; and TokenCredentialRequests through kube-apiserver)
// for PINNIPED_E2E_SOAK (e.g. 30m; make bench-soak), printing each agent
// replica's resident memory, goroutines and open files once a minute. It
// fails on any failed request, and when goroutines or open files keep
// growing (a leak: the last minute's count over twice the second minute's
// plus 50); memory is reported, since a garbage-collected heap may settle
// late.
func TestSoak(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("PINNIPED_E2E_SOAK"))
	if err != nil || d <= 0 {
		t.Skip("a benchmark: run with PINNIPED_E2E_SOAK=30m (make bench-soak)")
	}
	pinniped := installAgent(t)
	env := exchangingUser(t, pinniped)
	pods := agentPods(t)
	procs := make([]int, len(pods))
	for i, p := range pods {
		pids := podProcesses(p.uid)
		if len(pids) != 1 {
			t.Fatalf("pod %s: want its one agent process on this machine, found %v", p.name, pids)
		}
		procs[i] = pids[0]
	}
	rows := []string{"| minute |" + strings.Repeat(" RSS | goroutines | open files |", len(pods)),
		"|---|" + strings.Repeat("---|---|---|", len(pods))}
	type sample struct{ goroutines, files []int }
	var samples []sample
	underLoad(t, env, fmt.Sprintf("a %v soak", d), nil, func() {
		start := time.Now()
		for minute := 1; ; minute++ {
			time.Sleep(time.Until(start.Add(time.Duration(minute) * time.Minute)))
			var s sample
			row := fmt.Sprintf("| %d |", minute)
			for i, p := range pods {
				g := agentGoroutines(t, p.name)
				f := openFiles(procs[i])
				rss, _ := procMemory(procs[i])
				s.goroutines, s.files = append(s.goroutines, g), append(s.files, f)
				row += fmt.Sprintf(" %s | %d | %d |", mib(rss), g, f)
			}
			samples = append(samples, s)
			rows = append(rows, row)
			t.Logf("soak minute %d: %s", minute, row)
			if time.Since(start) >= d {
				return
			}
		}
	})
	t.Logf("agent replicas over the soak (one column group per pod):\n%s", strings.Join(rows, "\n"))
	if len(samples) < 3 {
		return
	}
	first, last := samples[1], samples[len(samples)-1]
	for i, p := range pods {
		if first.goroutines[i] < 0 || last.goroutines[i] < 0 || first.files[i] < 0 || last.files[i] < 0 {
			t.Errorf("%s: a count could not be read (-1 in the table), so no leak check", p.name)
			continue
		}
		if last.goroutines[i] > 2*first.goroutines[i]+50 {
			t.Errorf("%s: goroutines grew from %d (minute 2) to %d: a leak", p.name, first.goroutines[i], last.goroutines[i])
		}
		if last.files[i] > 2*first.files[i]+50 {
			t.Errorf("%s: open files grew from %d (minute 2) to %d: a leak", p.name, first.files[i], last.files[i])
		}
	}
	if after := agentPods(t); fmt.Sprint(after) != fmt.Sprint(pods) {
		t.Errorf("the agent's pods changed during the soak: %v, then %v", pods, after)
	}
}

var goroutinesLine = regexp.MustCompile(`(?m)^go_goroutines ([0-9]+)$`)

// agentGoroutines reads go_goroutines from the pod's /metrics through the
// API server's pod proxy (-1 if it cannot).
func agentGoroutines(t *testing.T, pod string) int {
	t.Helper()
	metrics, err := RunE(nil, "kubectl", "get", "--raw", "/api/v1/namespaces/pinniped/pods/"+pod+":8080/proxy/metrics")
	if err != nil {
		t.Logf("metrics of %s: %v", pod, err)
		return -1
	}
	m := goroutinesLine.FindStringSubmatch(metrics)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// openFiles counts the process's open file descriptors.
func openFiles(pid int) int {
	fds, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	if err != nil {
		return -1
	}
	return len(fds)
}
