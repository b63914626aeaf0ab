//go:build unix

package privatedir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTightenRefusesAParentOthersMayWrite: a writer creates and renames
// files in the directory by path, so anyone who may write to its parent
// (without the sticky bit) could swap the directory for a link in between.
func TestTightenRefusesAParentOthersMayWrite(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "private")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for mode, refused := range map[os.FileMode]bool{0o777: true, 0o770: true, 0o755: false, 0o777 | os.ModeSticky: false} {
		if err := os.Chmod(parent, mode); err != nil {
			t.Fatal(err)
		}
		err := Tighten(dir)
		switch {
		case refused && (!errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), "chmod go-w "+parent)):
			t.Errorf("parent %v: %v, want a refusal naming chmod go-w %s", mode, err, parent)
		case !refused && err != nil:
			t.Errorf("parent %v: %v", mode, err)
		}
	}
}

// TestTightenDoesNotChmodThroughALink: a link swapped in for the directory
// after Tighten looked at it is not followed to tighten its target.
func TestTightenDoesNotChmodThroughALink(t *testing.T) {
	parent := t.TempDir()
	dir, moved, target := filepath.Join(parent, "private"), filepath.Join(parent, "moved"), filepath.Join(parent, "target")
	for _, d := range []string{dir, target} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	raceHook = func(string) {
		if err := os.Rename(dir, moved); err != nil {
			t.Error(err)
		}
		if err := os.Symlink(target, dir); err != nil {
			t.Error(err)
		}
	}
	defer func() { raceHook = nil }()
	_ = Tighten(dir)
	info, err := os.Stat(target)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o755 {
		t.Errorf("the link's target was changed to %#o", info.Mode().Perm())
	}
}
