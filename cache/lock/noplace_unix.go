//go:build !windows

package lock

import "syscall"

// noPlaceErrnos: a read-only or full file system (or quota), a path
// through a file, a file system without locks.
var noPlaceErrnos = []syscall.Errno{syscall.EROFS, syscall.ENOSPC, syscall.EDQUOT, syscall.ENOTDIR, syscall.ENOLCK, syscall.EOPNOTSUPP}
