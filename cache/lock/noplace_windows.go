package lock

import (
	"os"
	"syscall"
)

// noPlaceErrnos are Windows' codes for a full disk (ERROR_DISK_FULL,
// ERROR_HANDLE_DISK_FULL), a write-protected one (ERROR_WRITE_PROTECT)
// and a path through a file (ERROR_PATH_NOT_FOUND, ERROR_DIRECTORY):
// syscall's EROFS and the like are values of its own there, which no call
// returns.
var noPlaceErrnos = []syscall.Errno{112, 39, 19, 3, 267}

// openFlags are gofrs/flock's own for a lock file.
const openFlags = os.O_CREATE | os.O_RDONLY
