// Package privatedir holds the one rule for a directory that keeps login
// secrets (cached credentials, sessions, their lock files): the directory
// is a real directory, owned by this user, with no group or other
// permission bits; a file in it is opened without following links and
// must be a regular file owned by this user. Anyone else who could enter
// the directory could plant a link named for one cluster's key that points
// at another cluster's credential, and kubectl would present it to the
// wrong cluster.
//
// It is like ssh's rule for ~/.ssh, but stricter on links (ssh follows a
// link to the directory; here one is refused, the directory being opened
// with O_NOFOLLOW and checked on its descriptor) and narrower on the
// directories above: a writer (Tighten) checks only the parent, and only
// that nobody else may write to it (CheckParent), where ssh checks every
// directory up to the root.
package privatedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrNotPrivate is in every refusal of a directory or a file that breaks
// the rule; the error says what is wrong and how to fix it.
var ErrNotPrivate = errors.New("not private to this user")

func notPrivate(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrNotPrivate}, args...)...)
}

// judgeDir applies the rule to a directory's mode and owner (owned is
// false when the owner is not this user).
func judgeDir(dir string, mode fs.FileMode, owned bool) error {
	switch {
	case mode&fs.ModeSymlink != 0:
		return notPrivate("%s is a link, not a directory, and is not followed for secrets: make it a real directory (mkdir -m 700), or point the cache elsewhere", dir)
	case !mode.IsDir():
		return notPrivate("%s is not a directory: remove it, or point the cache elsewhere", dir)
	case !owned:
		return notPrivate("%s belongs to another user: remove it (or have its owner remove it), or point the cache elsewhere", dir)
	case mode.Perm()&0o077 != 0:
		return notPrivate("%s has mode %#o, which lets others in: run chmod 700 %s", dir, mode.Perm(), dir)
	}
	return nil
}

// judgeFile applies the rule to a file's mode and owner.
func judgeFile(name string, mode fs.FileMode, owned bool) error {
	switch {
	case !mode.IsRegular():
		return notPrivate("%s is not a regular file: remove it (rm %s)", name, name)
	case !owned:
		return notPrivate("%s belongs to another user: remove it (rm %s)", name, name)
	}
	return nil
}

// WriteFile replaces the file name in dir with data, mode 0600 (Replace).
// dir must have passed Tighten (only this user can then change what is in
// it); it is checked again here, without following a link. A link named
// name is replaced, never followed.
func WriteFile(dir, name string, data []byte) error {
	if err := Check(dir); err != nil {
		return err
	}
	return Replace(filepath.Join(dir, name), data)
}

// Replace replaces the file at path with data, mode 0600: written to a
// temporary file beside it, synced and renamed into place, so a crash or a
// concurrent reader never sees half of it, and a failure leaves the old
// one. It makes path's directory (0700) if need be, and applies no rule to
// it: WriteFile does, for secrets.
func Replace(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// ".tmp-" first: the stores' RemoveAll takes such leftovers of a crash
	// (they may hold a credential) with the rest.
	f, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }() // a no-op after the rename
	// CreateTemp makes 0600 files already; be explicit in case of an odd umask.
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
