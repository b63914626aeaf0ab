package testbed

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOtherLiveBeds: a sibling bed needs the host's shared state while its
// kubelet runs or while it holds a record of that state and its test run
// holds its lock; a record without the lock is a crashed run's, and a lock
// without a record is a bed that gave the state up (or has not taken it).
func TestOtherLiveBeds(t *testing.T) {
	if err := os.MkdirAll("/run/lock", 0o755); err != nil {
		t.Skipf("no /run/lock: %v", err)
	}
	parent := t.TempDir()
	prefix := fmt.Sprintf("t%d", time.Now().UnixNano()%1e9)
	bed := func(name string, record, locked bool) string {
		name = prefix + name
		dir := filepath.Join(parent, name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if record {
			if err := os.WriteFile(filepath.Join(dir, "host-paths.json"), []byte("{}"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if locked {
			f, err := os.OpenFile(bedLockPath(name), os.O_CREATE|os.O_RDWR, 0o600)
			if err != nil {
				t.Skipf("cannot make a bed lock: %v", err)
			}
			if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = f.Close(); _ = os.Remove(bedLockPath(name)) })
		}
		return dir
	}
	ours := bed("ours", true, true)
	live := bed("live", true, true)
	bed("crashed", true, false)
	bed("given-up", false, true)
	got := otherLiveBeds(Config{Name: filepath.Base(ours), StateDir: ours})
	if strings.Join(got, ",") != live {
		t.Errorf("live beds %v, want only %s", got, live)
	}
}
