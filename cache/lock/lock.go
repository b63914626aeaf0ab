// Package lock serialises work on one cache key across processes, so that
// twenty kubectl calls racing on an empty cache cause one login, not twenty.
// It is a gofrs/flock file lock, held until Unlock or process exit (the
// kernel drops it if the process dies, so a crash never wedges the cache).
package lock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/gofrs/flock"

	"github.com/pinniped-kit/pinniped/cache/privatedir"
)

// IndexWait bounds the wait for a lock on a cache's index: its holders do
// one short read-modify-write, so a longer wait means a stopped process.
const IndexWait = time.Minute

// ErrBusy is in the error of an Acquire that waited for another process's
// lock until its context ended (or was canceled).
var ErrBusy = errors.New("the lock is held by another process")

// ErrNoPlace is in the error of an Acquire whose directory cannot hold a
// lock file, or no lock, at all: a read-only or full file system, a path
// through a file, a file system without locks. Nobody else can take such
// a lock either, so a caller may go on without it (saying so). Any other
// failure (above all permissions: another user's lock file) may hide a
// lock another process holds, and is not this.
var ErrNoPlace = errors.New("no lock can be taken here")

// noPlace reports whether err means the file system cannot hold the lock
// (noPlaceErrnos are the platform's codes for that).
func noPlace(err error) bool {
	var errno syscall.Errno
	return errors.As(err, &errno) && slices.Contains(noPlaceErrnos, errno)
}

// failed wraps err, marking it ErrNoPlace where that is what it means.
func failed(what string, err error) error {
	if noPlace(err) {
		return fmt.Errorf("%s: %w: %w", what, ErrNoPlace, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Lock is a held lock.
type Lock struct{ f *flock.Flock }

// Acquire waits for the lock on key until ctx ends. Lock files live in dir
// (created 0700) and are named by a hash, so keys may contain anything.
// dir and the lock file keep the rule of a directory of secrets
// (privatedir): a lock file is opened without following a link, and a
// directory others could write to could hold one that points anywhere.
func Acquire(ctx context.Context, dir, key string) (*Lock, error) {
	return acquire(dir, key, func(f *flock.Flock) (bool, error) { return f.TryLockContext(ctx, 25*time.Millisecond) })
}

// TryAcquire takes the lock on key if it is free, without waiting: a held
// lock is ErrBusy at once. For a question ("is a proxy running?") whose
// answer is the lock being held, where a wait would only cost time.
func TryAcquire(dir, key string) (*Lock, error) {
	return acquire(dir, key, func(f *flock.Flock) (bool, error) { return f.TryLock() })
}

func acquire(dir, key string, try func(*flock.Flock) (bool, error)) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, failed("create lock directory", err)
	}
	if err := privatedir.Tighten(dir); err != nil {
		return nil, fmt.Errorf("lock directory: %w", err)
	}
	sum := sha256.Sum256([]byte(key))
	path := filepath.Join(dir, hex.EncodeToString(sum[:12])+".lock")
	f := flock.New(path, flock.SetFlag(openFlags|privatedir.NoFollow))
	ok, err := try(f)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return nil, fmt.Errorf("another pinniped process still holds %s (a login, or a cache update, that has not finished; if none is running, a stopped one may hold it): %w: %w", path, ErrBusy, err)
		}
		if cerr := privatedir.CheckFile(path); errors.Is(cerr, privatedir.ErrNotPrivate) {
			return nil, fmt.Errorf("lock: %w", cerr)
		}
		return nil, failed("lock "+path, err)
	}
	if !ok {
		return nil, fmt.Errorf("could not lock %s: %w", path, ErrBusy)
	}
	if err := privatedir.CheckFile(path); err != nil {
		_ = f.Unlock()
		return nil, fmt.Errorf("lock: %w", err)
	}
	return &Lock{f: f}, nil
}

// Hold takes the lock on key in dir, waiting up to wait, and returns what
// releases it. The one rule of every caller: where a lock cannot be had at
// all (dir is "", or ErrNoPlace: a read-only or full file system), nobody
// else can hold one either, so the caller goes on without it; skipped then
// says why, for a caller that tells the person. Any other failure (above
// all a held lock, ErrBusy, or another user's lock file) is err: going on
// could race a process that does hold it.
func Hold(ctx context.Context, dir, key string, wait time.Duration) (release func(), skipped, err error) {
	if dir == "" {
		return func() {}, nil, nil
	}
	lctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	l, err := Acquire(lctx, dir, key)
	switch {
	case errors.Is(err, ErrNoPlace):
		return func() {}, err, nil
	case err != nil:
		return nil, nil, err
	}
	return func() { _ = l.Unlock() }, nil, nil
}

// Unlock releases the lock.
func (l *Lock) Unlock() error { return l.f.Unlock() }
