package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A run's events give each check's outcome; a check a failed run never
// reached says so (also when the run left no events, its toolchain not
// built), a minor not run is dashes, and non-event lines are skipped. The
// Markdown lists the toolchains and what the proxy did not serve.
func TestTable(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
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
	write("1.35-kubeadm.failed", "12\n")
	write("1.36-kubeadm.json", `{"Action":"pass","Test":"TestB"}`+"\n")
	write("kube/1.37/go.mod", "module x\n\nrequire (\n\tk8s.io/kubernetes v1.37.2\n\tk8s.io/api v0.37.2 // indirect\n)\n")
	write("kube/1.9/go.mod", "module x\n\nrequire k8s.io/kubernetes v1.9.1\n\n// k8s.io/a v0.9.1 is not served by the module proxy: v0.9.0, the newest.\nreplace k8s.io/a => k8s.io/a v0.9.0\n")
	var out bytes.Buffer
	md := filepath.Join(dir, "table.md")
	// An earlier document: its table goes, the notes after the marker stay.
	write("table.md", "# old\n| 1.30 | old row |\n"+notesMarker+"\n## What a run found\n\nkept as written\n")
	err := run([]string{"--dir", dir, "--commit", "abc", "--versions", "1.35 1.36 1.37", "--profiles", "kubeadm",
		"--checks", "TestA TestB TestC", "--kube-dir", filepath.Join(dir, "kube"), "--markdown", md},
		&out, func() time.Time { return time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC) })
	if err != nil {
		t.Fatal(err)
	}
	table := `| Kubernetes | profile | A | B | C | run | took |
|---|---|---|---|---|---|---|
| 1.35 | kubeadm | no result | no result | no result | failed | <1m |
| 1.36 | kubeadm | – | pass | – | interrupted | – |
| v1.37.2 | kubeadm | **FAIL** | pass | no result | failed | 12m |
`
	if want := "Kubernetes version matrix at commit abc, 2026-12-07 03:00 UTC:\n" + table; out.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", out.String(), want)
	}
	doc, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"commit abc on 2026-12-07 03:00 UTC", table,
		"| 1.9 | v1.9.1 | k8s.io/a v0.9.1 is not served by the module proxy: v0.9.0, the newest. |\n| 1.37 | v1.37.2 |  |\n"} {
		if !strings.Contains(string(doc), want) {
			t.Fatalf("markdown lacks %q:\n%s", want, doc)
		}
	}
	if strings.Contains(string(doc), "old row") || !strings.HasSuffix(string(doc), "\n"+notesMarker+"\n## What a run found\n\nkept as written\n") {
		t.Fatalf("the old table stayed, or the notes did not:\n%s", doc)
	}
}
