//go:build unix

package filestore

import (
	"errors"
	"os"
	"syscall"
)

var errNotOwned = errors.New("the file belongs to another user; remove it")

// readFile is os.ReadFile in plain system calls. The cached-login path reads
// one small file per kubectl call, and an *os.File costs start-up time that
// such a read does not need: os.Open offers the descriptor to the runtime's
// network poller (whose first use creates an epoll instance and an eventfd
// only to learn that a regular file cannot be polled), and every *os.File
// registers a finalizer.
func readFile(name string) ([]byte, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	defer func() { _ = syscall.Close(fd) }()
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: name, Err: err}
	}
	// A credential someone else wrote is not this user's: in a directory
	// others could write to, it would be planted, and sending it would act
	// as whoever planted it.
	if int(st.Uid) != os.Geteuid() {
		return nil, &os.PathError{Op: "open", Path: name, Err: errNotOwned}
	}
	// One read for the whole file, as os.ReadFile sizes its buffer.
	size := 512
	if st.Size > 0 && st.Size < 1<<20 {
		size = int(st.Size) + 1
	}
	b := make([]byte, 0, size)
	for {
		n, err := syscall.Read(fd, b[len(b):cap(b)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: name, Err: err}
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

func ownedByMe(info os.FileInfo) bool {
	st, ok := info.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}
