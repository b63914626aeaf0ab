package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// TestStartupStaysLean guards the cached login path: kubectl runs this binary
// on every call, and Go runs the init of every linked package each time.
// These packages cost milliseconds of init apiece (measured: the client-go
// typed clientset ~6 ms, cli-runtime's genericclioptions ~7 ms) and pull in
// megabytes; the CLI must reach clusters through client-go's dynamic client
// and clientcmd instead.
func TestStartupStaysLean(t *testing.T) {
	out := goList(t, "-deps", "-f", "{{.ImportPath}}", ".")
	if !strings.Contains(out, "github.com/spf13/cobra") {
		t.Fatalf("go list did not list the engine's dependencies; got:\n%s", out)
	}
	forbidden := []string{
		"k8s.io/client-go/kubernetes",
		"k8s.io/client-go/kubernetes/scheme",
		"k8s.io/cli-runtime/pkg/genericclioptions",
		"k8s.io/apiserver/",
		"k8s.io/client-go/kubernetes/fake",
		"k8s.io/apiextensions-apiserver/pkg/apiserver",
		// The login TUI's dependencies must not cost the cached path anything.
		// atotto/clipboard (imported by bubbles/textinput) runs exec.LookPath
		// for xclip, xsel and wl-copy in init; lipgloss v1 and termenv query
		// the terminal (OSC 11 background colour) on first use of a style.
		"github.com/atotto/clipboard",
		"github.com/charmbracelet/lipgloss",
		"github.com/muesli/termenv",
		"github.com/charmbracelet/bubbletea",
	}
	for _, dep := range strings.Fields(out) {
		for _, f := range forbidden {
			if dep == f || (strings.HasSuffix(f, "/") && strings.HasPrefix(dep, f)) {
				t.Errorf("pinniped links %s, which slows every kubectl call; keep it out of the CLI", dep)
			}
		}
	}
}

// TestRuneWidthInitStaysCheap: go-runewidth v0.0.26 and later fill two
// 64K-entry lookup tables in init (measured: 18 ms per start, ten times the
// whole CLI's init); v0.0.24 takes 0.1 ms. bubbletea, lipgloss and x/ansi
// link it, so every kubectl call would pay. Keep it at v0.0.25 or older
// until upstream makes those tables lazy (bubbles v2.2 needs v0.0.27, so
// bubbles stays at v2.1).
func TestRuneWidthInitStaysCheap(t *testing.T) {
	v := strings.TrimSpace(goList(t, "-m", "-f", "{{.Version}}", "github.com/mattn/go-runewidth"))
	var patch int
	if _, err := fmt.Sscanf(v, "v0.0.%d", &patch); err != nil {
		t.Fatalf("unexpected go-runewidth version %q: check its init cost with GODEBUG=inittrace=1 and update this test", v)
	}
	if patch > 25 {
		t.Errorf("go-runewidth %s builds lookup tables in init (~18 ms on every kubectl call); pin v0.0.24", v)
	}
}

// goList runs go list and returns its stdout only: on a cold module cache
// the go tool reports its downloads on stderr, and those lines are not
// packages.
func goList(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return string(out)
}
