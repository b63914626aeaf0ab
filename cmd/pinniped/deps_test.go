package main

import (
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
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	forbidden := []string{
		"k8s.io/client-go/kubernetes",
		"k8s.io/client-go/kubernetes/scheme",
		"k8s.io/cli-runtime/pkg/genericclioptions",
		"k8s.io/apiserver/",
		"k8s.io/client-go/kubernetes/fake",
		"k8s.io/apiextensions-apiserver/pkg/apiserver",
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if dep == f || (strings.HasSuffix(f, "/") && strings.HasPrefix(dep, f)) {
				t.Errorf("pinniped links %s, which slows every kubectl call; keep it out of the CLI", dep)
			}
		}
	}
}
