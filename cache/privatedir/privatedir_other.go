//go:build !unix

package privatedir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// NoFollow: os.OpenFile has no such flag here; Check and CheckFile refuse
// links instead.
const NoFollow = 0

// Check applies the rule to dir, without following a link there. Windows
// keeps owners and access in ACLs, not in a mode: a user's profile
// directories are their own, so only the kind of entry is checked.
func Check(dir string) error {
	info, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	return judgeDir(dir, info.Mode()&^0o077, true)
}

// Tighten: there is no mode to tighten here; it is Check.
func Tighten(dir string) error { return Check(dir) }

// CheckParent: who may replace an entry is in the parent's ACL here, and
// a user's profile directories are their own; nothing is checked.
func CheckParent(string) error { return nil }

// CheckFile applies the rule to the file at path, without following a
// link there.
func CheckFile(path string) error {
	info, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if info.Mode()&os.ModeSymlink != 0 {
		return notPrivate("%s is a link, which is never followed for secrets: remove it", path)
	}
	return judgeFile(path, info.Mode(), true)
}

// ReadFile reads file name in dir once both pass the rule.
func ReadFile(dir, name string) ([]byte, error) {
	if err := Check(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name)
	info, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if err := judgeFile(path, info.Mode(), true); err != nil {
		return nil, err
	}
	return os.ReadFile(path) //nolint:gosec // the cache's own file, its directory and kind checked above
}

// Remove removes the entry name from dir without following a link: a
// link there is removed itself, and dir must be a real directory. A
// missing dir or entry is fs.ErrNotExist.
func Remove(dir, name string) error {
	if err := Check(dir); err != nil {
		return err
	}
	return os.Remove(filepath.Join(dir, name))
}

// RemoveMatching is Remove for every entry of dir whose name matches; it
// returns how many it removed.
func RemoveMatching(dir string, match func(name string) bool) (int, error) {
	if err := Check(dir); err != nil {
		return 0, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, e := range entries {
		if !match(e.Name()) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
