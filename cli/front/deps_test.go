package front_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pinniped-kit/pinniped/cli/front"
)

// TestFrontStaysTiny: kubectl runs this binary before nearly every request,
// and Go runs the init of every package a binary links, before main. Only
// the standard library and the packages a cache hit needs may be linked
// here (measured: 1.8 ms to start, against 1.6 ms for a Go hello world and
// 4 ms once the login flows' dependencies are linked). Everything else
// belongs in pinniped-engine.
func TestFrontStaysTiny(t *testing.T) {
	for _, goos := range []string{"linux", "darwin", "windows"} {
		// Only stdout, one import path a line: the go tool writes its own
		// news ("go: downloading ...") to stderr when the module cache is
		// cold, and none of it is a package.
		cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{if not .Standard}}{{.Dir}} {{join .GoFiles \" \"}}{{end}}", front.Binary)
		cmd.Env = append(cmd.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list (%s): %v\n%s", goos, err, stderr.Bytes())
		}
		allowed := []string{
			"github.com/pinniped-kit/pinniped/cmd/pinniped",
			"github.com/pinniped-kit/pinniped/cli/front/fastlogin",
			"github.com/pinniped-kit/pinniped/cli/front/handoff",
			"github.com/pinniped-kit/pinniped/cli/login/loginflags",
			"github.com/pinniped-kit/pinniped/cli/login/config",
			"github.com/pinniped-kit/pinniped/agent/apis/httpsurl",
			"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix",
			"github.com/pinniped-kit/pinniped/cli/credstore",
			"github.com/pinniped-kit/pinniped/cli/localproxy/state",
			"github.com/pinniped-kit/pinniped/cli/login/execcred",
			"github.com/pinniped-kit/pinniped/cache",
			"github.com/zalando/go-keyring",
			"github.com/godbus/dbus/v5",
			"github.com/danieljoos/wincred",
			"github.com/gofrs/flock",
			"golang.org/x/sys/",
		}
		// The module's own requirements decide which versions link.
		_, _ = os.Stat(filepath.Join("..", "..", "go.mod"))
		_, _ = os.Stat(filepath.Join("..", "..", "go.sum"))
		var deps []string
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			deps = append(deps, f[0])
			// go test caches a result by the files the test looks at, not
			// by what go list read: looking at each linked package's files
			// (and its directory, for a file added) runs the test again
			// when the front's code or a dependency changes.
			if len(f) > 1 {
				_, _ = os.Stat(f[1])
				for _, name := range f[2:] {
					_, _ = os.Stat(filepath.Join(f[1], name))
				}
			}
		}
		if !slices.Contains(deps, "github.com/pinniped-kit/pinniped/cli/front/fastlogin") {
			t.Fatalf("go list (%s) did not list the front's own packages; got:\n%s", goos, out)
		}
		for _, dep := range deps {
			if strings.HasPrefix(dep, "compress/") {
				// Its tables are built at start-up, which every kubectl
				// call would pay.
				t.Errorf("%s: pinniped links %s", goos, dep)
			}
			if dep == "runtime/pprof" || dep == "net/http/pprof" {
				// Linking it turns allocation sampling on for every call.
				t.Errorf("%s: pinniped links %s", goos, dep)
			}
			if !strings.Contains(strings.SplitN(dep, "/", 2)[0], ".") {
				continue // the standard library
			}
			ok := false
			for _, a := range allowed {
				if dep == a || strings.HasPrefix(dep, a+"/") || (strings.HasSuffix(a, "/") && strings.HasPrefix(dep, a)) {
					ok = true
					break
				}
			}
			if !ok {
				t.Errorf("%s: pinniped links %s; keep it in pinniped-engine, the front must start in about the time of a hello world", goos, dep)
			}
		}
	}
}
