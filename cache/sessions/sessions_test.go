package sessions_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/cache"
	"github.com/pinniped-kit/pinniped/cache/filestore"
	"github.com/pinniped-kit/pinniped/cache/sessions"
)

func TestPutGetDeleteClear(t *testing.T) {
	dir := t.TempDir()
	c := &sessions.Cache{Store: &filestore.Store{Dir: dir + "/creds"}, LockDir: dir + "/locks"}
	ctx := context.Background()
	if load(t, c, "sess-a") != nil {
		t.Fatal("a session from nowhere")
	}
	want := &sessions.Tokens{IDToken: "id", IDTokenExpiry: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), RefreshToken: "r", Username: "alice", Groups: []string{"devs"}}
	for _, k := range []string{"sess-a", "sess-b", "sess-a"} {
		if err := c.Put(ctx, k, want); err != nil {
			t.Fatal(err)
		}
	}
	if got := load(t, c, "sess-a"); got == nil || got.RefreshToken != "r" || got.Username != "alice" || !got.IDTokenExpiry.Equal(want.IDTokenExpiry) {
		t.Fatalf("read back %+v", got)
	}
	if keys, err := c.Keys(ctx); err != nil || len(keys) != 2 {
		t.Fatalf("index %v %v", keys, err)
	}
	if had, err := c.Delete(ctx, "sess-a"); err != nil || !had {
		t.Fatalf("delete: %v %v", had, err)
	}
	if had, _ := c.Delete(ctx, "sess-a"); had {
		t.Fatal("deleted twice")
	}
	if n, err := c.Clear(ctx); err != nil || n != 1 || load(t, c, "sess-b") != nil {
		t.Fatalf("clear: %d %v", n, err)
	}
	if keys, err := c.Keys(ctx); err != nil || len(keys) != 0 {
		t.Fatalf("index after clear %v %v", keys, err)
	}
}

// deafIndex is a keyring that does not answer for the index only (a
// D-Bus call that timed out).
type deafIndex struct {
	cache.Store
	deaf bool
}

func (s *deafIndex) Get(ctx context.Context, key string) ([]byte, error) {
	if s.deaf && key == "pinniped-session-index" {
		return nil, fmt.Errorf("keyring: %w", context.DeadlineExceeded)
	}
	return s.Store.Get(ctx, key)
}

// TestUnreadableIndexIsNeverRewritten: an index the store cannot read is
// an error, not an empty list. Saving a session then leaves the index as
// it was (rewriting it as [new] would orphan every other session's
// refresh token) and saves nothing unlisted, and listing fails, so logout
// --all cannot report success over sessions it could not see.
func TestUnreadableIndexIsNeverRewritten(t *testing.T) {
	dir := t.TempDir()
	store := &deafIndex{Store: &filestore.Store{Dir: dir + "/creds"}}
	c := &sessions.Cache{Store: store, LockDir: dir + "/locks"}
	ctx := context.Background()
	tok := &sessions.Tokens{RefreshToken: "r"}
	for _, k := range []string{"sess-a", "sess-b"} {
		if err := c.Put(ctx, k, tok); err != nil {
			t.Fatal(err)
		}
	}
	store.deaf = true
	if err := c.Put(ctx, "sess-c", tok); err == nil {
		t.Error("saving beside an unreadable index reported no error")
	}
	if _, err := c.Keys(ctx); err == nil {
		t.Error("an unreadable index listed as empty")
	}
	if n, err := c.Clear(ctx); err == nil || n != 0 {
		t.Errorf("clear over an unreadable index: %d %v", n, err)
	}
	store.deaf = false
	keys, err := c.Keys(ctx)
	if err != nil || len(keys) != 2 || keys[0] != "sess-a" || keys[1] != "sess-b" {
		t.Fatalf("the index became %v (%v); want [sess-a sess-b]", keys, err)
	}
	if load(t, c, "sess-c") != nil {
		t.Error("a session was saved that its index does not list")
	}
}

// TestCorruptSessionIsDropped: a corrupt value is a miss, never a crash,
// and it is removed.
func TestCorruptSessionIsDropped(t *testing.T) {
	store := &filestore.Store{Dir: filepath.Join(t.TempDir(), "creds")} // made 0700 by the store; t.TempDir is 0755
	ctx := context.Background()
	_ = store.Set(ctx, "sess-x", []byte("{corrupt"))
	c := &sessions.Cache{Store: store}
	if load(t, c, "sess-x") != nil {
		t.Fatal("a corrupt session was returned")
	}
	if files, _ := filepath.Glob(filepath.Join(store.Dir, "*.cred")); len(files) != 0 {
		t.Fatalf("left %v", files)
	}
	_ = os.RemoveAll(store.Dir)
}

// slowIndex widens the window between reading and writing the index.
type slowIndex struct{ cache.Store }

func (s slowIndex) Get(ctx context.Context, key string) ([]byte, error) {
	if key == "pinniped-session-index" {
		time.Sleep(20 * time.Millisecond)
	}
	return s.Store.Get(ctx, key)
}

// TestIndexAcrossProcesses: sessions saved by many processes at once all
// stay listed, so logout --all finds every one of them.
func TestIndexAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	store := slowIndex{&filestore.Store{Dir: dir + "/creds"}}
	const n = 8
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &sessions.Cache{Store: store, LockDir: dir + "/locks"} // a process of its own
			if err := c.Put(context.Background(), fmt.Sprintf("sess-%d", i), &sessions.Tokens{IDToken: "t"}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if keys, err := (&sessions.Cache{Store: store}).Keys(context.Background()); err != nil || len(keys) != n {
		t.Fatalf("the session index lists %d of %d sessions: %v", len(keys), n, keys)
	}
}

// TestNoPlaceForLocks: where no lock can be taken (a lock directory under
// a regular file), the session and its index are saved all the same.
func TestNoPlaceForLocks(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c := &sessions.Cache{Store: &filestore.Store{Dir: dir + "/creds"}, LockDir: filepath.Join(file, "locks")}
	ctx := context.Background()
	if err := c.Put(ctx, "sess-a", &sessions.Tokens{IDToken: "id", RefreshToken: "r"}); err != nil {
		t.Fatal(err)
	}
	if got := load(t, c, "sess-a"); got == nil || got.RefreshToken != "r" {
		t.Fatalf("got %+v", got)
	}
	if keys, err := c.Keys(ctx); err != nil || len(keys) != 1 {
		t.Fatalf("index %v", keys)
	}
}

// load is c.Load of key, failing t on an error.
func load(t *testing.T, c *sessions.Cache, key string) *sessions.Tokens {
	t.Helper()
	tok, err := c.Load(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
