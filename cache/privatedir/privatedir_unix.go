//go:build unix

package privatedir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// NoFollow is the open flag that refuses a link in the last component.
const NoFollow = unix.O_NOFOLLOW

// Check applies the rule to dir, without following a link there; a
// missing dir is fs.ErrNotExist.
func Check(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return &os.PathError{Op: "lstat", Path: dir, Err: err}
	}
	return judgeDir(dir, statMode(&st), int(st.Uid) == os.Geteuid())
}

// Tighten clears the group and other bits of dir when it is this user's
// own real directory, then applies the rule. Only a writer may: it
// replaces what is in the directory by rename and never reads it, whereas
// a reader cannot know who put what there while it was open.
//
// A writer creates and renames files in dir by path, so dir's parent must
// not let anyone else replace dir (CheckParent). The mode is changed
// through the opened directory, never by path: a link swapped in after
// the check is not followed to tighten, or then trust, its target.
func Tighten(dir string) error {
	if err := CheckParent(dir); err != nil {
		return err
	}
	dfd, st, err := openDir(dir)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(dfd) }()
	if raceHook != nil {
		raceHook(dir)
	}
	if statMode(&st).IsDir() && int(st.Uid) == os.Geteuid() && statMode(&st).Perm()&0o077 != 0 {
		if err := unix.Fchmod(dfd, 0o700); err != nil {
			return notPrivate("%s lets other users in and cannot be tightened (%v): run chmod 700 %s", dir, err, dir)
		}
		if err := unix.Fstat(dfd, &st); err != nil {
			return &os.PathError{Op: "stat", Path: dir, Err: err}
		}
	}
	return judgeDir(dir, statMode(&st), int(st.Uid) == os.Geteuid())
}

// raceHook, set by tests only, runs in Tighten between the check of the
// opened directory and the change of its mode: where another process
// could swap the path for a link.
var raceHook func(dir string)

// CheckParent refuses dir when its parent lets another user rename or
// replace it: the parent is writable by its group or others without the
// sticky bit (as /tmp has), or belongs to another user (other than root)
// who may write to it. Such a user could swap dir for a link between a
// check of dir and a write by path into it. Only the parent is checked,
// not every directory above it.
func CheckParent(dir string) error {
	parent := filepath.Dir(filepath.Clean(dir))
	var st unix.Stat_t
	if err := unix.Stat(parent, &st); err != nil {
		return &os.PathError{Op: "stat", Path: parent, Err: err}
	}
	mode, owner := uint32(st.Mode), int(st.Uid) //nolint:unconvert // uint16 on some systems (darwin)
	switch {
	case mode&0o022 != 0 && mode&unix.S_ISVTX == 0:
		return notPrivate("refusing to keep secrets in %s: others may write to %s (mode %#o, no sticky bit), and could replace what is in it: run chmod go-w %s, or point the cache elsewhere", dir, parent, mode&0o777, parent)
	case owner != os.Geteuid() && owner != 0 && mode&0o200 != 0:
		return notPrivate("refusing to keep secrets in %s: %s belongs to another user, who could replace what is in it: point the cache elsewhere", dir, parent)
	}
	return nil
}

// CheckFile applies the rule to the file at path (a lock file, say),
// without following a link there. Its directory must have passed Check
// or Tighten: then only this user can change what path names.
func CheckFile(path string) error {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return &os.PathError{Op: "lstat", Path: path, Err: err}
	}
	if statMode(&st)&fs.ModeSymlink != 0 {
		return notPrivate("%s is a link, which is never followed for secrets: remove it (rm %s)", path, path)
	}
	return judgeFile(path, statMode(&st), int(st.Uid) == os.Geteuid())
}

// ReadFile reads file name in dir once both pass the rule: the directory
// is opened and checked first, and the file opened relative to it, so
// neither can be swapped between the check and the read. A missing
// directory or file is fs.ErrNotExist.
//
// It is made of plain system calls: the cached-login path reads one small
// file per kubectl call, and an *os.File costs start-up time such a read
// does not need (os.Open offers the descriptor to the runtime's network
// poller, whose first use creates an epoll instance and an eventfd only to
// learn that a regular file cannot be polled, and registers a finalizer).
func ReadFile(dir, name string) ([]byte, error) {
	dfd, st, err := openDir(dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = unix.Close(dfd) }()
	if err := judgeDir(dir, statMode(&st), int(st.Uid) == os.Geteuid()); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name)
	// O_NONBLOCK: a FIFO planted under the name must not hang the read
	// before it is refused as not a regular file.
	fd, err := open(func() (int, error) {
		return unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		var lst unix.Stat_t
		if !errors.Is(err, unix.ENOENT) && unix.Fstatat(dfd, name, &lst, unix.AT_SYMLINK_NOFOLLOW) == nil && statMode(&lst)&fs.ModeSymlink != 0 {
			return nil, notPrivate("%s is a link, which is never followed for secrets: remove it (rm %s)", path, path)
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer func() { _ = unix.Close(fd) }()
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if err := judgeFile(path, statMode(&st), int(st.Uid) == os.Geteuid()); err != nil {
		return nil, err
	}
	// One read for the whole file, as os.ReadFile sizes its buffer.
	size := 512
	if st.Size > 0 && st.Size < 1<<20 {
		size = int(st.Size) + 1
	}
	b := make([]byte, 0, size)
	for {
		n, err := unix.Read(fd, b[len(b):cap(b)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return b, nil
		}
		b = b[:len(b)+n]
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// openDir opens dir without following a link there and stats the open
// descriptor, which the caller closes. When the open fails on what the
// rule refuses (O_NOFOLLOW met a link: ELOOP on Linux, other codes
// elsewhere; O_DIRECTORY a file), the error is Check's, in the rule's
// words. A missing dir is fs.ErrNotExist.
func openDir(dir string) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	dfd, err := open(func() (int, error) {
		return unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		if !errors.Is(err, unix.ENOENT) {
			if cerr := Check(dir); errors.Is(cerr, ErrNotPrivate) {
				return -1, st, cerr
			}
		}
		return -1, st, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	if err := unix.Fstat(dfd, &st); err != nil {
		_ = unix.Close(dfd)
		return -1, st, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	return dfd, st, nil
}

func open(f func() (int, error)) (int, error) {
	for {
		fd, err := f()
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// statMode is st's type and permission bits as fs.FileMode.
func statMode(st *unix.Stat_t) fs.FileMode {
	m := uint32(st.Mode) //nolint:unconvert // uint16 on some systems (darwin)
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFREG:
	default:
		mode |= fs.ModeIrregular
	}
	return mode
}

// Remove removes the entry name from dir without following a link: a
// link there is removed itself, and dir must be this user's own real
// directory, though it may break the rule otherwise (others let in):
// removing from one's own directory is safe, and is how a cache that broke
// the rule is emptied. A missing dir or entry is fs.ErrNotExist.
func Remove(dir, name string) error {
	return inOwnDir(dir, func(dfd int) error {
		if err := unix.Unlinkat(dfd, name, 0); err != nil {
			return &os.PathError{Op: "remove", Path: filepath.Join(dir, name), Err: err}
		}
		return nil
	})
}

// RemoveMatching is Remove for every entry of dir whose name matches; it
// returns how many it removed.
func RemoveMatching(dir string, match func(name string) bool) (int, error) {
	n := 0
	err := inOwnDir(dir, func(dfd int) error {
		// Its own descriptor: the *os.File closes it.
		rfd, err := unix.Dup(dfd)
		if err != nil {
			return &os.PathError{Op: "dup", Path: dir, Err: err}
		}
		d := os.NewFile(uintptr(rfd), dir)
		names, err := d.Readdirnames(-1)
		_ = d.Close()
		if err != nil {
			return err
		}
		var errs []error
		for _, name := range names {
			if !match(name) {
				continue
			}
			if err := unix.Unlinkat(dfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, &os.PathError{Op: "remove", Path: filepath.Join(dir, name), Err: err})
				continue
			}
			n++
		}
		return errors.Join(errs...)
	})
	return n, err
}

// inOwnDir runs f on dir opened without following a link, once it is
// found a directory owned by this user.
func inOwnDir(dir string, f func(dfd int) error) error {
	dfd, st, err := openDir(dir)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(dfd) }()
	// The mode is not judged: the entries of one's own directory are one's own to remove.
	if err := judgeDir(dir, statMode(&st)&^0o077, int(st.Uid) == os.Geteuid()); err != nil {
		return err
	}
	return f(dfd)
}
