//go:build !windows

package lock

import (
	"os"
	"runtime"
	"syscall"
)

// noPlaceErrnos: a read-only or full file system (or quota), a path
// through a file, a file system without locks.
var noPlaceErrnos = []syscall.Errno{syscall.EROFS, syscall.ENOSPC, syscall.EDQUOT, syscall.ENOTDIR, syscall.ENOLCK, syscall.EOPNOTSUPP}

// openFlags are gofrs/flock's own for a lock file (read-only, but
// read-write where only that can take a write lock).
var openFlags = func() int {
	switch runtime.GOOS {
	case "aix", "solaris", "illumos":
		return os.O_CREATE | os.O_RDWR
	}
	return os.O_CREATE | os.O_RDONLY
}()
