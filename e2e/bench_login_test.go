//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// TestCachedLoginBench times what kubectl pays on every call: `pinniped
// login oidc` answering from a valid cached credential, from the file cache
// and from the real keyring, side by side with a Go hello-world binary in
// the same run. It prints a table and asserts only correctness. Set
// PINNIPED_E2E_LOAD=1 (make bench-login).
func TestCachedLoginBench(t *testing.T) {
	if os.Getenv("PINNIPED_E2E_LOAD") == "" {
		t.Skip("a benchmark: run with PINNIPED_E2E_LOAD=1 (make bench-login)")
	}
	pinniped := installAgent(t)
	alice := testbed.DexUsers[0]
	dir := t.TempDir()
	hello := filepath.Join(dir, "hello")
	_ = os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nimport \"os\"\n\nfunc main() { os.Stdout.WriteString(\"{}\\n\") }\n"), 0o600)
	_ = os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n\ngo 1.25\n"), 0o600)
	build := exec.CommandContext(context.Background(), "go", "build", "-trimpath", "-ldflags=-s -w", "-o", hello, ".")
	build.Dir, build.Env = dir, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build hello: %v\n%s", err, out)
	}

	kubeconfig := userKubeconfig(t, pinniped, "--oidc-flow=password")
	var kc struct {
		Clusters []struct {
			Cluster struct {
				Server string `json:"server"`
				CA     string `json:"certificate-authority-data"`
			} `json:"cluster"`
		} `json:"clusters"`
		Users []struct {
			User struct {
				Exec struct {
					Args []string `json:"args"`
				} `json:"exec"`
			} `json:"user"`
		} `json:"users"`
	}
	if err := yaml.Unmarshal(mustRead(t, kubeconfig), &kc); err != nil {
		t.Fatal(err)
	}
	execInfo := fmt.Sprintf(`{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{"interactive":false,"cluster":{"server":%q,"certificate-authority-data":%q}}}`,
		kc.Clusters[0].Cluster.Server, kc.Clusters[0].Cluster.CA)

	type variant struct {
		name string
		argv []string
		env  []string
	}
	login := func(cache string) []string {
		return append([]string{pinniped}, append(kc.Users[0].User.Exec.Args, "--credential-cache="+cache)...)
	}
	base := []string{"KUBERNETES_EXEC_INFO=" + execInfo, "XDG_CONFIG_HOME=" + dir,
		"PINNIPED_USERNAME=" + alice.Email, "PINNIPED_PASSWORD=" + alice.Password}
	variants := []variant{
		{"go hello world", []string{hello}, nil},
		{"pinniped login, file cache", login("file"), base},
		{"pinniped login, OS keyring", login("keyring"), base},
	}
	// Fill both caches once (this is the login; what follows is the cached path).
	for _, v := range variants[1:] {
		if _, err := runTimed(v.argv, v.env); err != nil {
			t.Fatal(err)
		}
	}
	const n = 1000
	samples := make([][]time.Duration, len(variants))
	for range n { // interleaved, so machine load affects all alike
		for i, v := range variants {
			d, err := runTimed(v.argv, v.env)
			if err != nil {
				t.Fatal(err)
			}
			samples[i] = append(samples[i], d)
		}
	}
	// Peak memory, in a pass of its own (GNU time adds a fork to each run).
	peaks := make([]int64, len(variants))
	for range 20 {
		for i, v := range variants {
			peak, err := peakRSS(t, v.argv, v.env)
			if err != nil {
				t.Fatal(err)
			}
			peaks[i] = max(peaks[i], peak)
		}
	}
	rows := []string{"| command | p50 | p90 | mean | vs hello (p50) | peak RSS (highest of 20 runs) |", "|---|---|---|---|---|---|"}
	var helloP50 time.Duration
	for i, v := range variants {
		s := samples[i]
		sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
		var sum time.Duration
		for _, d := range s {
			sum += d
		}
		p50, p90 := s[len(s)/2], s[len(s)*9/10]
		if i == 0 {
			helloP50 = p50
		}
		rows = append(rows, fmt.Sprintf("| %s | %v | %v | %v | %.2fx | %s |", v.name, p50.Round(10*time.Microsecond),
			p90.Round(10*time.Microsecond), (sum/time.Duration(len(s))).Round(10*time.Microsecond), float64(p50)/float64(helloP50), mib(peaks[i])))
	}
	t.Logf("cached login path, %d runs each, interleaved:\n%s", n, strings.Join(rows, "\n"))
}

// runTimed runs argv and returns its wall time.
func runTimed(argv, env []string) (time.Duration, error) {
	cmd := exec.CommandContext(context.Background(), argv[0], argv[1:]...)
	cmd.Env = append(BedEnv(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	d := time.Since(start)
	if err != nil || !strings.HasPrefix(string(out), "{") {
		return 0, fmt.Errorf("%s: %w\n%s", argv[0], err, stderr.String())
	}
	return d, nil
}

// peakRSS runs argv under GNU time and returns its peak resident memory in
// bytes. Not the rusage os/exec reports: Go starts a child with vfork, so
// the child's high-water mark starts at the whole test process's, and a
// hello world would read 40 MiB. GNU time forks from a process of its own
// of about a megabyte, which is then the floor.
func peakRSS(t *testing.T, argv, env []string) (int64, error) {
	out := filepath.Join(t.TempDir(), "time")
	cmd := exec.CommandContext(context.Background(), "/usr/bin/time", append([]string{"-f", "%M", "-o", out, "--"}, argv...)...)
	cmd.Env = append(BedEnv(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("%s under /usr/bin/time (e2e/scripts/install-deps.sh installs it): %w\n%s", argv[0], err, stderr.String())
	}
	if !strings.HasPrefix(string(stdout), "{") {
		return 0, fmt.Errorf("%s under /usr/bin/time printed no ExecCredential:\n%s", argv[0], stderr.String())
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		return 0, err
	}
	kib, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("GNU time wrote %q: %w", raw, err)
	}
	return kib << 10, nil
}
