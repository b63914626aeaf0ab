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
func Tighten(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err == nil && statMode(&st).IsDir() && int(st.Uid) == os.Geteuid() && statMode(&st).Perm()&0o077 != 0 {
		if err := unix.Chmod(dir, 0o700); err != nil {
			return notPrivate("%s lets other users in and cannot be tightened (%v): run chmod 700 %s", dir, err, dir)
		}
	}
	return Check(dir)
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
	dfd, err := open(func() (int, error) {
		return unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		// O_NOFOLLOW met a link (ELOOP on Linux, other codes elsewhere), or
		// O_DIRECTORY a file: Check says which, in the rule's words.
		if !errors.Is(err, unix.ENOENT) {
			if cerr := Check(dir); cerr != nil && errors.Is(cerr, ErrNotPrivate) {
				return nil, cerr
			}
		}
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer func() { _ = unix.Close(dfd) }()
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
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
