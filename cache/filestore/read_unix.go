//go:build unix

package filestore

import (
	"io"
	"os"
	"syscall"
)

// readFile is os.ReadFile without the poller: os.Open offers every file to
// the runtime's network poller, whose first use creates an epoll instance
// and an eventfd only to learn that a regular file cannot be polled. The
// cached-login path reads one small file per kubectl call, so that was
// start-up time for nothing. A descriptor opened here is blocking, and
// os.NewFile never registers a blocking descriptor.
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
	f := os.NewFile(uintptr(fd), name)
	defer func() { _ = f.Close() }()
	// One read for the whole file, as os.ReadFile sizes its buffer.
	size := 512
	if info, err := f.Stat(); err == nil && info.Size() > 0 && info.Size() < 1<<20 {
		size = int(info.Size()) + 1
	}
	b := make([]byte, 0, size)
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}
