//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Profiles of the agent under a benchmark's load: CPU and allocations,
// pprof files written where PINNIPED_BENCH_PROFILES says (the bench-*
// targets set it), so that where the time goes is read from the code
// that ran, not guessed. The agent serves them only on loopback, when its
// --profiling-listen is set; the benchmark sets it on the Deployments it
// installed and reaches each pod through kubectl port-forward.

// profilingPort is where a benchmark's agents serve their profiles.
const profilingPort = "6060"

// benchProfiles is the directory profiles are written to; "" means none
// are taken.
func benchProfiles(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("PINNIPED_BENCH_PROFILES")
	if dir == "" {
		return ""
	}
	if !filepath.IsAbs(dir) {
		t.Fatalf("PINNIPED_BENCH_PROFILES=%s: give an absolute path (a relative one would be under e2e/, where the tests run)", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("PINNIPED_BENCH_PROFILES: %v", err)
	}
	return dir
}

// enableProfiling adds --profiling-listen=127.0.0.1:6060 to the agent
// container of each of the installation's Deployments and waits for the
// rollout. Only for an installation of this build (another implementation
// has no such flag).
func (in installation) enableProfiling(t *testing.T) {
	t.Helper()
	if !in.installedHere {
		t.Fatalf("%s: only an installation of this build serves profiles", in.name)
	}
	args := append(in.kubectlArgs(), "-n", in.namespace)
	for _, d := range in.deployments(t).Items {
		var ops []map[string]any
		for i, c := range d.Spec.Template.Spec.Containers {
			if c.Name != "agent" {
				continue
			}
			ops = append(ops, map[string]any{"op": "add", "path": fmt.Sprintf("/spec/template/spec/containers/%d/args/-", i),
				"value": "--profiling-listen=127.0.0.1:" + profilingPort})
		}
		if len(ops) == 0 {
			t.Fatalf("%s: deployment/%s has no container named agent", in.name, d.Metadata.Name)
		}
		p, _ := json.Marshal(ops)
		Kubectl(t, append(append([]string{}, args...), "patch", "deployment", d.Metadata.Name, "--type=json", "-p", string(p))...)
		Kubectl(t, append(append([]string{}, args...), "rollout", "status", "deployment", d.Metadata.Name, "--timeout=3m")...)
	}
	time.Sleep(6 * time.Second) // the old pods' drain
}

// profileDuring runs load while it takes a CPU profile and an allocation
// profile (what was allocated in the same seconds) from each of the
// installation's running pods, reached through kubectl port-forward (see
// profileWhile).
func (in installation) profileDuring(t *testing.T, dir, label string, seconds int, load func()) {
	t.Helper()
	args := append(append([]string{}, in.kubectlArgs()...), "-n", in.namespace, "get", "pods", "--field-selector=status.phase=Running",
		"-o", "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}")
	if in.selector != "" {
		args = append(args, "-l", in.selector)
	}
	pods := strings.Fields(Kubectl(t, args...))
	if len(pods) == 0 {
		t.Fatalf("%s: no running pod to profile", in.name)
	}
	var sources []profileSource
	for _, pod := range pods {
		s := startStream(t, nil, "kubectl", append(append([]string{}, in.kubectlArgs()...), "-n", in.namespace, "port-forward",
			"--address=127.0.0.1", "pod/"+pod, ":"+profilingPort)...)
		// The port-forwards end with the profiles, not with the test: the
		// rows after them share these two cores.
		defer s.stop()
		line := s.waitLine(t, 30*time.Second, func(l string) bool { return strings.HasPrefix(l, "Forwarding from 127.0.0.1:") })
		_, port, err := net.SplitHostPort(strings.Fields(strings.TrimPrefix(line, "Forwarding from "))[0])
		if err != nil {
			t.Fatalf("port-forward to %s: %q: %v", pod, line, err)
		}
		sources = append(sources, profileSource{name: pod, addr: "127.0.0.1:" + port, hint: func() string {
			return fmt.Sprintf("does pod %s run with --profiling-listen=127.0.0.1:%s? kubectl port-forward said: %s", pod, profilingPort, s.errb.String())
		}})
	}
	profileWhile(t, dir, label, in.name+"'s pods", seconds, sources, load)
}

// profileSource is one process serving profiles (package profiling) at
// addr; hint says what to check when they cannot be read.
type profileSource struct {
	name, addr string
	hint       func() string
}

// profileWhile runs load while it takes a CPU profile and an allocation
// profile over the same seconds from each source. It writes them to dir as
// <label>.<source>.cpu.pprof and <label>.<source>.allocs.pprof and logs
// the top entries of the sources' profiles merged (what names them all).
// load must run for longer than seconds.
func profileWhile(t *testing.T, dir, label, what string, seconds int, sources []profileSource, load func()) {
	t.Helper()
	type fetch struct {
		src       profileSource
		url, file string
	}
	var fetches []fetch
	for _, src := range sources {
		for _, kind := range []struct{ path, file string }{{"profile", "cpu"}, {"allocs", "allocs"}} {
			fetches = append(fetches, fetch{src, fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", src.addr, kind.path, seconds),
				filepath.Join(dir, fmt.Sprintf("%s.%s.%s.pprof", label, src.name, kind.file))})
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(fetches))
	for i, f := range fetches {
		wg.Go(func() { errs[i] = fetchProfile(f.url, f.file, time.Duration(seconds+30)*time.Second) })
	}
	time.Sleep(200 * time.Millisecond) // the profiles start before the load
	load()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			f := fetches[i]
			t.Fatalf("profile %s from %s: %v (%s)", f.url, f.src.name, err, f.src.hint())
		}
	}
	for _, kind := range []string{"cpu", "allocs"} {
		var files []string
		for _, f := range fetches {
			if strings.HasSuffix(f.file, "."+kind+".pprof") {
				files = append(files, f.file)
			}
		}
		t.Logf("%s: %s profile of %s (files in %s):\n%s", label, kind, what, dir, pprofTop(t, kind, files))
	}
}

// freeLoopbackAddr is a 127.0.0.1 address with a port free a moment ago,
// for a process told where to listen.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String()
}

func fetchProfile(url, file string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
	}
	out, err := os.Create(file) //nolint:gosec // the benchmark's own output directory
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// pprofTop is go tool pprof's top entries of the profiles merged: by
// cumulative CPU for a CPU profile, by bytes allocated for allocations.
func pprofTop(t *testing.T, kind string, files []string) string {
	t.Helper()
	args := []string{"tool", "pprof", "-top", "-nodecount=30"}
	if kind == "cpu" {
		args = append(args, "-cum")
	} else {
		args = append(args, "-sample_index=alloc_space")
	}
	cmd := exec.CommandContext(context.Background(), "go", append(args, files...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("(go tool pprof failed: %v: %s)", err, out)
	}
	return string(out)
}
