package layout

import (
	"bufio"
	"bytes"
	"io/fs"
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
