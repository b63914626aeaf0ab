package warnonce_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/cli/warnonce"
)

const keyring = "! OS keyring unavailable (it did not answer in time at 12:01PM; trying it again after 12:03PM); keeping credentials in /home/a/.config/pinniped/credentials (mode 0600) instead\n"

// TestOncePerCausePerDay: a cause is shown once, in this process and in
// the next (another Store on the same directory), until a day has passed;
// the details that vary (an error's text, a time) do not make a new cause,
// another cause is shown.
func TestOncePerCausePerDay(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "locks")
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	first := &warnonce.Store{Dir: dir, Now: clock}
	if !first.First(keyring) {
		t.Fatal("the first warning was not shown")
	}
	if first.First(keyring) {
		t.Fatal("shown twice in one process")
	}
	next := &warnonce.Store{Dir: dir, Now: clock}
	if next.First(strings.ReplaceAll(keyring, "12:01PM", "12:07PM")) {
		t.Fatal("shown again by the next process, for the same cause with other details")
	}
	if !next.First("! could not cache the credential (disk full): the next kubectl call will log in again") {
		t.Fatal("another cause was not shown")
	}
	now = now.Add(warnonce.Period)
	if !(&warnonce.Store{Dir: dir, Now: clock}).First(keyring) {
		t.Fatal("not shown again after a day")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "warned.json"))
	if err != nil || strings.Contains(string(raw), "keyring") {
		t.Fatalf("the record holds a warning's text, or is missing: %q, %v", raw, err)
	}
}

// TestWithoutADirectory: nothing is kept across processes, and every
// warning is shown once per process.
func TestWithoutADirectory(t *testing.T) {
	s := &warnonce.Store{}
	var out bytes.Buffer
	w := s.Writer(&out)
	for range 3 {
		fmt.Fprint(w, keyring)
	}
	if strings.Count(out.String(), "keyring unavailable") != 1 {
		t.Fatalf("wrote %q", out.String())
	}
}

// TestUnusableRecordNeverHides: a record that cannot be written (its
// directory is a file) shows every warning, once per process.
func TestUnusableRecordNeverHides(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for run := range 2 { // a process each
		if !(&warnonce.Store{Dir: f}).First(keyring) {
			t.Fatalf("run %d: an unusable record hid a warning", run+1)
		}
	}
}

func TestCause(t *testing.T) {
	if a, b := warnonce.Cause("x (error 1) at 12:01 y"), warnonce.Cause("x (error 2) at 12:09 y"); a != b {
		t.Fatalf("%q != %q", a, b)
	}
}
