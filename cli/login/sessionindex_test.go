package login

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/cache"
	"github.com/pinniped-kit/pinniped/cache/filestore"
	"github.com/pinniped-kit/pinniped/cli/oidclogin"
)

type quietUI struct{ UI }

func (quietUI) Progress(string) {}

// slowSessionIndex widens the window between reading and writing the
// session index.
type slowSessionIndex struct{ cache.Store }

func (s slowSessionIndex) Get(ctx context.Context, key string) ([]byte, error) {
	if key == sessionIndexKey {
		time.Sleep(20 * time.Millisecond)
	}
	return s.Store.Get(ctx, key)
}

// TestSessionIndexAcrossProcesses: sessions saved by many processes at once
// all stay listed, so logout --all finds every one of them.
func TestSessionIndexAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	store := slowSessionIndex{&filestore.Store{Dir: dir + "/creds"}}
	const n = 8
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := &Engine{Store: store, LockDir: dir + "/locks", UI: quietUI{}} // a process of its own
			e.saveSession(context.Background(), fmt.Sprintf("sess-%d", i), &oidclogin.Tokens{IDToken: "t"})
		}()
	}
	wg.Wait()
	e := &Engine{Store: store, LockDir: dir + "/locks"}
	if keys := e.sessionKeys(context.Background()); len(keys) != n {
		t.Fatalf("the session index lists %d of %d sessions: %v", len(keys), n, keys)
	}
}
