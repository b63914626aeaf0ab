package lock_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/cache/lock"
)

func TestMutualExclusion(t *testing.T) {
	dir := t.TempDir()
	var inside, maxInside atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := lock.Acquire(context.Background(), dir, "cluster-a")
			if err != nil {
				t.Error(err)
				return
			}
			n := inside.Add(1)
			for {
				m := maxInside.Load()
				if n <= m || maxInside.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(5 * time.Millisecond)
			inside.Add(-1)
			_ = l.Unlock()
		}()
	}
	wg.Wait()
	if maxInside.Load() != 1 {
		t.Fatalf("%d holders at once", maxInside.Load())
	}
}

func TestTimeoutSaysWhy(t *testing.T) {
	dir := t.TempDir()
	held, err := lock.Acquire(context.Background(), dir, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Unlock() }()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	// flock locks are per open file description, so a second Acquire in the
	// same process contends like another process would.
	_, err = lock.Acquire(ctx, dir, "k")
	if err == nil || !strings.Contains(err.Error(), "another pinniped process") || !errors.Is(err, lock.ErrBusy) {
		t.Fatalf("want a timeout naming the cause, got %v", err)
	}
}

// TestAcrossProcesses holds the lock in a child process and checks this one waits.
func TestAcrossProcesses(t *testing.T) {
	if os.Getenv("LOCK_CHILD_DIR") != "" {
		l, err := lock.Acquire(context.Background(), os.Getenv("LOCK_CHILD_DIR"), "k")
		if err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString("locked\n")
		time.Sleep(300 * time.Millisecond)
		_ = l.Unlock()
		os.Exit(0)
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=TestAcrossProcesses")
	cmd.Env = append(os.Environ(), "LOCK_CHILD_DIR="+dir)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	if _, err := out.Read(buf); err != nil || string(buf) != "locked\n" {
		t.Fatalf("child did not lock: %q %v", buf, err)
	}
	start := time.Now()
	l, err := lock.Acquire(context.Background(), dir, "k")
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Unlock()
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Fatalf("acquired after %v while the child held the lock", waited)
	}
	_ = cmd.Wait()
}

// TestNoPlaceForLocksIsNotBusy: a lock directory that cannot be made is
// another failure than a lock held elsewhere, which callers treat
// differently (they may go on without the lock).
func TestNoPlaceForLocksIsNotBusy(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := lock.Acquire(context.Background(), filepath.Join(file, "locks"), "k")
	if err == nil || errors.Is(err, lock.ErrBusy) || !errors.Is(err, lock.ErrNoPlace) {
		t.Fatalf("want ErrNoPlace, not ErrBusy, got %v", err)
	}
}

// TestLinkedLockFileIsRefused: a lock file is not opened through a link
// (it would create or truncate nothing, but lock whatever it points at),
// and another user's lock directory is refused.
func TestLinkedLockFileIsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "locks")
	l, err := lock.Acquire(context.Background(), dir, "k")
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Unlock()
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("%d lock files", len(entries))
	}
	name := filepath.Join(dir, entries[0].Name())
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Acquire(context.Background(), dir, "k"); err == nil || !strings.Contains(err.Error(), "is a link") || errors.Is(err, lock.ErrNoPlace) {
		t.Fatalf("a linked lock file: %v", err)
	}
	if os.Geteuid() != 0 {
		return
	}
	other := filepath.Join(t.TempDir(), "others")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(other, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Acquire(context.Background(), other, "k"); err == nil || !strings.Contains(err.Error(), "belongs to another user") || errors.Is(err, lock.ErrNoPlace) {
		t.Fatalf("another user's lock directory: %v", err)
	}
}

// TestHold: no directory means no lock and nothing to say; a held lock is
// ErrBusy once the wait ends; a free one is taken and released.
func TestHold(t *testing.T) {
	release, skipped, err := lock.Hold(context.Background(), "", "k", time.Second)
	if err != nil || skipped != nil || release == nil {
		t.Fatalf("no directory: %v, %v", skipped, err)
	}
	release()
	dir := filepath.Join(t.TempDir(), "locks")
	release, skipped, err = lock.Hold(context.Background(), dir, "k", time.Second)
	if err != nil || skipped != nil {
		t.Fatalf("a free lock: %v, %v", skipped, err)
	}
	if _, _, err := lock.Hold(context.Background(), dir, "k", 100*time.Millisecond); !errors.Is(err, lock.ErrBusy) {
		t.Fatalf("a held lock: %v, want lock.ErrBusy", err)
	}
	release()
	again, _, err := lock.Hold(context.Background(), dir, "k", time.Second)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again()
}
