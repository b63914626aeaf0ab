package layout

import (
	"bufio"
	"bytes"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/pinniped-kit/pinniped/"

// mapRow is a row of the map: | `package` | job |.
var mapRow = regexp.MustCompile("^\\| `([^`]+)` \\| (.+) \\|$")

// TestTheMapNamesEveryPackage: docs/architecture.md's map names every
// package `go list ./...` lists, each once and with a job, and no other.
func TestTheMapNamesEveryPackage(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	inMap := false
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			inMap = strings.HasPrefix(line, "## Map")
			continue
		}
		if !inMap || !strings.HasPrefix(line, "|") || line == "| Package | Job |" || line == "|---|---|" {
			continue
		}
		m := mapRow.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("a row of the map is not | `package` | job |: %s", line)
			continue
		}
		if named[m[1]] {
			t.Errorf("the map names %s twice", m[1])
		}
		if strings.TrimSpace(m[2]) == "" {
			t.Errorf("the map gives %s no job", m[1])
		}
		named[m[1]] = true
	}
	if len(named) == 0 {
		t.Fatal(`docs/architecture.md has no "## Map" section with rows | ` + "`package`" + ` | job |`)
	}

	// go test caches a result by the files a test opens: walking the tree
	// makes a new or removed package directory run the test again.
	if err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != root {
			return filepath.SkipDir
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Only stdout, one import path a line: the go tool's own news goes to
	// stderr. -find lists packages without resolving their imports, so no
	// module is fetched.
	cmd := exec.Command("go", "list", "-find", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var listed []string
	for _, p := range strings.Fields(string(out)) {
		listed = append(listed, strings.TrimPrefix(p, module))
	}
	for _, p := range listed {
		if !named[p] {
			t.Errorf("package %s is not in docs/architecture.md's map: add a row saying what it does", p)
		}
	}
	for p := range named {
		if !slices.Contains(listed, p) {
			t.Errorf("docs/architecture.md's map names %s, which is no package (moved or gone?)", p)
		}
	}
}

// room is the folder a package lives in, two levels deep (cli/login,
// agent/endpoints), or the top-level package itself (cache, kubeconfig).
func room(pkg string) string {
	parts := strings.SplitN(pkg, "/", 3)
	if len(parts) > 2 {
		parts = parts[:2]
	}
	return strings.Join(parts, "/")
}

// TestNoTwoRoomsImportEachOther: the product's code (tests aside) has no
// rooms importing each other, directly or round a longer loop, so each room can be read, and moved,
// as a unit. It reads the import lines of every non-test Go file.
func TestNoTwoRoomsImportEachOther(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	edges := map[string]map[string]string{} // room -> room -> a file that imports it
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		from := room(filepath.ToSlash(rel))
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if !strings.HasPrefix(p, module) {
				continue
			}
			to := room(strings.TrimPrefix(p, module))
			if to == from {
				continue
			}
			if edges[from] == nil {
				edges[from] = map[string]string{}
			}
			edges[from][to] = path
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(edges) == 0 {
		t.Fatal("no imports between rooms were found: the walk read nothing")
	}
	// Any loop, of any length: a depth-first walk that meets a room still
	// on its path has found one.
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(r string)
	visit = func(r string) {
		state[r] = onPath
		path = append(path, r)
		for _, next := range slices.Sorted(maps.Keys(edges[r])) {
			switch state[next] {
			case onPath:
				i := slices.Index(path, next)
				loop := append(slices.Clone(path[i:]), next)
				t.Errorf("rooms import each other in a loop: %s (first import: %s): move what they share into one of them, or a room of its own",
					strings.Join(loop, " -> "), edges[r][next])
			case unseen:
				visit(next)
			}
		}
		path = path[:len(path)-1]
		state[r] = done
	}
	for _, r := range slices.Sorted(maps.Keys(edges)) {
		if state[r] == unseen {
			visit(r)
		}
	}
}
