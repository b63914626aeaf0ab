//go:build !windows

package credstore

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestTempFallbackMustBePrivate: without HOME the cache lives in
// <tmp>/pinniped-<uid>, a name anyone can guess and create first; it is
// used only when it is this user's own private directory.
func TestTempFallbackMustBePrivate(t *testing.T) {
	t.Setenv("HOME", "")
	t.Setenv("XDG_CONFIG_HOME", "")
	for _, c := range []struct {
		name    string
		prepare func(t *testing.T, dir string)
		refused string
	}{
		{"created fresh", func(*testing.T, string) {}, ""},
		{"own and private", func(t *testing.T, dir string) { must(t, os.Mkdir(dir, 0o700)) }, ""},
		{"open to others", func(t *testing.T, dir string) { must(t, os.Mkdir(dir, 0o700)); must(t, os.Chmod(dir, 0o777)) }, "lets others in"},
		{"a link to another directory", func(t *testing.T, dir string) {
			other := filepath.Join(filepath.Dir(dir), "attacker")
			must(t, os.Mkdir(other, 0o700))
			must(t, os.Symlink(other, dir))
		}, "not a directory"},
		{"a file", func(t *testing.T, dir string) { must(t, os.WriteFile(dir, nil, 0o600)) }, "not a directory"},
		{"a parent anyone may write to, not sticky", func(t *testing.T, dir string) {
			must(t, os.Chmod(filepath.Dir(dir), 0o777))
		}, "no sticky bit"},
		{"a parent its group may write to, not sticky", func(t *testing.T, dir string) {
			must(t, os.Chmod(filepath.Dir(dir), 0o770))
		}, "no sticky bit"},
		{"a sticky parent anyone may write to", func(t *testing.T, dir string) {
			must(t, os.Chmod(filepath.Dir(dir), 0o777|os.ModeSticky))
		}, ""},
		{"another user's", func(t *testing.T, dir string) {
			if os.Getuid() != 0 {
				t.Skip("needs root to make a directory another user owns")
			}
			must(t, os.Mkdir(dir, 0o700))
			must(t, os.Chown(dir, 12345, 12345))
		}, "belongs to another user"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			dir := filepath.Join(tmp, "pinniped-"+strconv.Itoa(os.Getuid()))
			c.prepare(t, dir)
			got, err := ForProcess().ConfigDir()
			if c.refused == "" {
				if err != nil || got != dir {
					t.Fatalf("ConfigDir() = %q, %v; want %s", got, err, dir)
				}
				info, err := os.Lstat(dir)
				if err != nil || !info.IsDir() || info.Mode().Perm() != 0o700 {
					t.Fatalf("%s: %v %v", dir, info, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.refused) || !strings.Contains(err.Error(), "set HOME") {
				t.Fatalf("ConfigDir() = %q, %v; want a refusal saying %q and what to do", got, err, c.refused)
			}
			// Nothing that opens the cache gets past it either.
			if _, err := ForProcess().Open("file", nil); err == nil {
				t.Fatal("Open used the refused directory")
			}
			if _, err := ForProcess().DefaultLockDir(); err == nil {
				t.Fatal("DefaultLockDir used the refused directory")
			}
			// A cache path of its own, or none at all, still works: the
			// refused directory cannot stop such a login.
			path := filepath.Join(t.TempDir(), "creds.yaml")
			if st, err := ForProcess().Open(path, nil); err != nil || st == nil {
				t.Fatalf("Open(a path) = %v, %v", st, err)
			}
			if d, err := ForProcess().LockDir(path); err != nil || d != filepath.Join(filepath.Dir(path), "pinniped-locks") {
				t.Fatalf("LockDir(a path) = %q, %v", d, err)
			}
			if d, err := ForProcess().LockDir("none"); err != nil || d != "" {
				t.Fatalf("LockDir(none) = %q, %v", d, err)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
