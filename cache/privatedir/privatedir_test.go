package privatedir

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
