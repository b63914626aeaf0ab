// Command matrixtable prints the version matrix's table (e2e/matrix.sh):
// one row per Kubernetes minor and profile, one column per check, from the
// `go test -json` events each run left in the results directory.
//
//	matrixtable --dir DIR --commit C --versions "1.32 ... 1.37" --profiles "kubeadm managed" \
//	    --checks "TestA TestB" [--markdown FILE]
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, time.Now); err != nil {
		fmt.Fprintln(os.Stderr, "matrixtable:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer, now func() time.Time) error {
	fs := flag.NewFlagSet("matrixtable", flag.ContinueOnError)
	dir := fs.String("dir", "", "results directory (e2e/matrix.sh's, one per commit)")
	commit := fs.String("commit", "", "the commit the results are for")
	versions := fs.String("versions", "", "Kubernetes minors, in order")
	profiles := fs.String("profiles", "kubeadm managed", "profiles, in order")
	checks := fs.String("checks", "", "the tests that are the checks, in order")
	markdown := fs.String("markdown", "", "also write the table, with how it was made, to this file")
	kubeDir := fs.String("kube-dir", "", "the toolchains' modules (e2e/tools/kube), listed in the Markdown")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *versions == "" || *checks == "" {
		return errors.New("--dir, --versions and --checks are required")
	}
	m := matrix{Commit: *commit, Date: now().UTC(), Checks: strings.Fields(*checks)}
	for _, v := range strings.Fields(*versions) {
		for _, p := range strings.Fields(*profiles) {
			r, err := readRun(filepath.Join(*dir, v+"-"+p), m.Checks)
			if err != nil {
				return err
			}
			r.Minor, r.Profile = v, p
			m.Rows = append(m.Rows, r)
		}
	}
	table := m.table()
	if _, err := fmt.Fprintf(stdout, "Kubernetes version matrix at commit %s, %s:\n%s", m.Commit, m.Date.Format("2006-01-02 15:04 UTC"), table); err != nil {
		return err
	}
	if *markdown == "" {
		return nil
	}
	toolchains := ""
	if *kubeDir != "" {
		t, err := toolchainTable(*kubeDir)
		if err != nil {
			return err
		}
		toolchains = t
	}
	notes, err := keptNotes(*markdown)
	if err != nil {
		return err
	}
	return writeFile(*markdown, m.document(table, toolchains)+notes)
}

// notesMarker opens the part of the document people write (what a run
// found, what was shown on purpose): a new table keeps it as it is.
const notesMarker = "<!-- Written by hand from here on: make e2e-matrix keeps it. -->"

// keptNotes is the hand-written part of the document at path, from the
// marker on; empty when there is no document yet, or one without it. A
// document that cannot be read is an error: its notes would be lost.
func keptNotes(path string) (string, error) {
	old, err := os.ReadFile(path) //nolint:gosec // the document this writes
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read %s to keep its notes: %w", path, err)
	}
	_, notes, found := strings.Cut(string(old), notesMarker)
	if !found {
		return "", nil
	}
	return "\n" + notesMarker + notes, nil
}

type matrix struct {
	Commit string
	Date   time.Time
	Checks []string
	Rows   []row
}

type row struct {
	Minor, Profile string
	Release        string        // v1.37.2, from the toolchain's kube-apiserver
	State          string        // passed, failed, interrupted, not run
	Took           time.Duration // the run's wall clock
	Results        map[string]string
}

// readRun reads one (minor, profile) run: base.json (events), base.release,
// and base.passed or base.failed (its seconds).
func readRun(base string, checks []string) (row, error) {
	r := row{State: "not run", Results: map[string]string{}}
	for _, st := range []string{"passed", "failed"} {
		raw, err := os.ReadFile(base + "." + st)
		if err == nil {
			r.State = st
			if s, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil {
				r.Took = time.Duration(s) * time.Second
			}
		}
	}
	if raw, err := os.ReadFile(base + ".release"); err == nil {
		r.Release = strings.TrimPrefix(strings.TrimSpace(string(raw)), "Kubernetes ")
	}
	outcomes := map[string]string{}
	f, err := os.Open(base + ".json")
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return r, err
	default:
		defer f.Close()
		if outcomes, err = readEvents(f); err != nil {
			return r, fmt.Errorf("%s.json: %w", base, err)
		}
		if r.State == "not run" {
			// Events but no outcome: the run was stopped part way.
			r.State = "interrupted"
		}
	}
	for _, c := range checks {
		switch o, ok := outcomes[c]; {
		case ok:
			r.Results[c] = o
		case r.State == "passed" || r.State == "failed":
			// Asked for and never reported: the run stopped before it (a
			// toolchain that did not build, a failed bring-up, a timeout).
			r.Results[c] = "no result"
		}
	}
	return r, nil
}

// event is the part of a test2json event the table needs.
type event struct {
	Action string
	Test   string
}

// readEvents returns each top-level test's outcome (pass, fail, skip). Lines
// that are not events (the run script's own, a build failure's) are skipped.
func readEvents(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var e event
		if json.Unmarshal(line, &e) != nil || e.Test == "" || strings.Contains(e.Test, "/") {
			continue
		}
		switch e.Action {
		case "pass", "fail", "skip":
			out[e.Test] = e.Action
		}
	}
	return out, sc.Err()
}

func (m matrix) table() string {
	var b strings.Builder
	b.WriteString("| Kubernetes | profile |")
	for _, c := range m.Checks {
		b.WriteString(" " + strings.TrimPrefix(c, "Test") + " |")
	}
	b.WriteString(" run | took |\n|---|---|")
	b.WriteString(strings.Repeat("---|", len(m.Checks)+2) + "\n")
	for _, r := range m.Rows {
		release := r.Minor
		if r.Release != "" {
			release = r.Release
		}
		fmt.Fprintf(&b, "| %s | %s |", release, r.Profile)
		for _, c := range m.Checks {
			o := r.Results[c]
			if o == "" {
				o = "–"
			}
			b.WriteString(" " + mark(o) + " |")
		}
		fmt.Fprintf(&b, " %s | %s |\n", r.State, minutes(r.Took))
	}
	return b.String()
}

// minutes is d as "12m" or "1h5m"; "<1m" under half a minute, "–" for none.
func minutes(d time.Duration) string {
	switch {
	case d <= 0:
		return "–"
	case d < 30*time.Second:
		return "<1m"
	}
	return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
}

func mark(outcome string) string {
	switch outcome {
	case "pass":
		return "pass"
	case "fail":
		return "**FAIL**"
	default:
		return outcome
	}
}

func (m matrix) document(table, toolchains string) string {
	return fmt.Sprintf(`# Tested on: the Kubernetes version matrix

Written by `+"`make e2e-matrix`"+` (e2e/matrix.sh) at commit %s on %s: the core end-to-end
checks on each Kubernetes minor the test bed has a toolchain for, both profiles, one bed at a
time, on a 2-core machine. Each column is one test of the e2e suite, run whole (its subtests
included); e2e/matrix.sh says what each covers. "–" is a check not run, "no result" one
a finished run never reached; an interrupted run shows what it reported before it was
stopped.

%s
%s`, m.Commit, m.Date.Format("2006-01-02 15:04 UTC"), table, toolchains)
}

// toolchainTable lists each minor's release and what its module says the
// module proxy did not serve (e2e/scripts/kube-module.sh's comments).
func toolchainTable(dir string) (string, error) {
	mods, err := filepath.Glob(filepath.Join(dir, "1.*", "go.mod"))
	if err != nil {
		return "", err
	}
	sort.Slice(mods, func(i, j int) bool { return minorOf(mods[i]) < minorOf(mods[j]) })
	var b strings.Builder
	b.WriteString("## The toolchains\n\nEach built from the Go module proxy by e2e/scripts/build-tools.sh, from its module in\n" +
		"`e2e/tools/kube/<minor>`.\n\n| minor | release | not served by the module proxy, and what was taken instead |\n|---|---|---|\n")
	for _, p := range mods {
		raw, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		release, notes := "", []string{}
		for _, l := range strings.Split(string(raw), "\n") {
			// "require k8s.io/kubernetes v1.37.2", or the same inside a
			// require block, as go mod tidy writes it.
			f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(l), "require "))
			if len(f) >= 2 && f[0] == "k8s.io/kubernetes" && strings.HasPrefix(f[1], "v") {
				release = f[1]
			}
			if strings.HasPrefix(l, "// ") && strings.Contains(l, " is not served by the module proxy: ") {
				notes = append(notes, strings.TrimPrefix(l, "// "))
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", filepath.Base(filepath.Dir(p)), release, strings.Join(notes, "; "))
	}
	return b.String(), nil
}

// minorOf is 37 for ".../1.37/go.mod".
func minorOf(modPath string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(filepath.Dir(modPath)), "1."))
	return n
}

// writeFile writes the file whole or leaves the old one.
func writeFile(path, content string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".matrixtable-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(content); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
