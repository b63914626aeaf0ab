package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A run's events give each check's outcome; a check the run never reached
// says so, a minor not run is dashes, and non-event lines are skipped.
func TestTable(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("1.37-kubeadm.json", `e2e/run.sh: something
{"Action":"run","Test":"TestA"}
{"Action":"pass","Test":"TestA/sub"}
{"Action":"fail","Test":"TestA"}
{"Action":"output","Test":"TestB","Output":"--- PASS: TestB"}
{"Action":"pass","Test":"TestB"}
{"Action":"fail"}
`)
	write("1.37-kubeadm.failed", "725\n")
	write("1.37-kubeadm.release", "Kubernetes v1.37.2\n")
	var out bytes.Buffer
	md := filepath.Join(dir, "table.md")
	err := run([]string{"--dir", dir, "--commit", "abc", "--versions", "1.36 1.37", "--profiles", "kubeadm",
		"--checks", "TestA TestB TestC", "--markdown", md}, &out, func() time.Time { return time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC) })
	if err != nil {
		t.Fatal(err)
	}
	want := `| Kubernetes | profile | A | B | C | run | took |
|---|---|---|---|---|---|---|
| 1.36 | kubeadm | – | – | – | not run | – |
| v1.37.2 | kubeadm | **FAIL** | pass | no result | failed | 12m |
`
	if out.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", out.String(), want)
	}
	doc, err := os.ReadFile(md)
	if err != nil || !strings.Contains(string(doc), "commit abc on 2026-12-07 03:00 UTC") || !strings.Contains(string(doc), want) {
		t.Fatalf("markdown: %v\n%s", err, doc)
	}
}
