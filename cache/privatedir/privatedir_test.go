package privatedir

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// privateDir is a new directory that passes the rule (t.TempDir is 0755).
func privateDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "private")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestReadFileMatchesOSReadFile(t *testing.T) {
	dir := privateDir(t)
	for _, size := range []int{0, 1, 511, 512, 513, 4096, 100_000, 3 << 20} {
		name := filepath.Join(dir, fmt.Sprint(size))
		want := bytes.Repeat([]byte{'x'}, size)
		if err := os.WriteFile(name, want, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFile(dir, filepath.Base(name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("size %d: got %d bytes, %v", size, len(got), err)
		}
	}
	if _, err := ReadFile(dir, "missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(dir, "sub"); !errors.Is(err, ErrNotPrivate) {
		t.Errorf("reading a directory: %v, want ErrNotPrivate", err)
	}
}

// TestWriteFile: a file written is 0600 whatever the umask, replaces what
// was there (a link included, which is not followed) and leaves no
// temporary file; a directory that breaks the rule is refused.
func TestWriteFile(t *testing.T) {
	dir := privateDir(t)
	if err := WriteFile(dir, "f", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(dir, "f", []byte("two")); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(dir, "f")
	if err != nil || string(got) != "two" {
		t.Fatalf("%q %v", got, err)
	}
	info, err := os.Lstat(filepath.Join(dir, "f"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v %v", info.Mode(), err)
	}
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("theirs"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "link")); err != nil {
		t.Skip("no links here:", err)
	}
	if err := WriteFile(dir, "link", []byte("mine")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "theirs" {
		t.Errorf("the link was followed: its target now holds %q", b)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("entries %v: a temporary file was left", entries)
	}
	if runtime.GOOS == "windows" {
		return // no mode to break the rule with
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(dir, "f", []byte("three")); !errors.Is(err, ErrNotPrivate) {
		t.Errorf("a directory others may enter: %v", err)
	}
}
