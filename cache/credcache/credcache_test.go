package credcache_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/cache"
	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cache/filestore"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newCache(t *testing.T) (*credcache.Cache, *clock, cache.Store) {
	clk := &clock{t: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	store := &filestore.Store{Dir: filepath.Join(t.TempDir(), "creds")} // made 0700 by the store; t.TempDir is 0755
	return &credcache.Cache{Store: store, Now: clk.now}, clk, store
}

func cred(exp time.Time) credcache.Credential {
	return credcache.Credential{ClientCertificateData: "cert", ClientKeyData: "key", ExpirationTimestamp: exp}
}

func TestExpirySkew(t *testing.T) {
	c, clk, _ := newCache(t)
	ctx := context.Background()
	if err := c.Put(ctx, "k", "cluster a", cred(clk.t.Add(time.Minute))); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := c.Get(ctx, "k"); !ok {
		t.Fatal("fresh credential not returned")
	}
	clk.t = clk.t.Add(31 * time.Second) // 29 s left: inside the skew
	if _, ok, _ := c.Get(ctx, "k"); ok {
		t.Fatal("a credential expiring within 30 s was handed out")
	}
}

func TestCorruptEntryIsDropped(t *testing.T) {
	c, _, store := newCache(t)
	ctx := context.Background()
	for name, raw := range map[string]string{
		"garbage":    "{{{",
		"no secret":  `{"version":1,"credential":{"expirationTimestamp":"2030-01-01T00:00:00Z"}}`,
		"no expiry":  `{"version":1,"credential":{"token":"t"}}`,
		"future fmt": `{"version":9,"credential":{"token":"t","expirationTimestamp":"2030-01-01T00:00:00Z"}}`,
	} {
		_ = store.Set(ctx, "k", []byte(raw))
		got, ok, err := c.Get(ctx, "k")
		if err != nil || ok || got != nil {
			t.Errorf("%s: got %v %v %v", name, got, ok, err)
		}
		if _, err := store.Get(ctx, "k"); err == nil {
			t.Errorf("%s: corrupt entry left in place", name)
		}
	}
}

func TestIndexGarbageCollection(t *testing.T) {
	c, clk, store := newCache(t)
	ctx := context.Background()
	_ = c.Put(ctx, "old", "", cred(clk.t.Add(time.Minute)))
	clk.t = clk.t.Add(2 * time.Minute)
	for i := range credcache.MaxEntries + 5 {
		clk.t = clk.t.Add(time.Second)
		if err := c.Put(ctx, fmt.Sprintf("k%d", i), "", cred(clk.t.Add(time.Hour))); err != nil {
			t.Fatal(err)
		}
	}
	list, _ := c.List(ctx)
	if len(list) != credcache.MaxEntries {
		t.Fatalf("%d entries, want the cap %d", len(list), credcache.MaxEntries)
	}
	for _, k := range []string{"old", "k0", "k4"} {
		if _, err := store.Get(ctx, k); err == nil {
			t.Errorf("%s should have been evicted", k)
		}
	}
	n, err := c.Clear(ctx)
	if err != nil || n != credcache.MaxEntries {
		t.Fatalf("cleared %d, %v", n, err)
	}
	if _, ok, _ := c.Get(ctx, "k10"); ok {
		t.Fatal("credential survived Clear")
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"version":1,"credential":{"token":"t","expirationTimestamp":"2030-01-01T00:00:00Z"}}`))
	f.Add([]byte(`{"version":1,"credential":{"expirationTimestamp":"not a time"}}`))
	f.Add([]byte{0xff, 0x00})
	f.Fuzz(func(t *testing.T, raw []byte) {
		store := &filestore.Store{Dir: filepath.Join(t.TempDir(), "creds")} // made 0700 by the store; t.TempDir is 0755
		c := &credcache.Cache{Now: time.Now, Store: store}
		_ = store.Set(context.Background(), "k", raw)
		got, ok, err := c.Get(context.Background(), "k")
		if err != nil {
			t.Fatal(err)
		}
		if ok && (got == nil || got.ExpirationTimestamp.IsZero()) {
			t.Fatalf("returned an unusable credential from %q", raw)
		}
	})
}

// slowIndex widens the window between reading and writing the index, as a
// keyring call or a busy disk does.
type slowIndex struct{ cache.Store }

func (s slowIndex) Get(ctx context.Context, key string) ([]byte, error) {
	if key == "pinniped-credcache-index" {
		time.Sleep(20 * time.Millisecond)
	}
	return s.Store.Get(ctx, key)
}

// TestIndexUpdatesAcrossProcesses: many processes caching at once (each
// with its own Cache, as separate kubectl calls have) lose no entry of the
// shared index.
func TestIndexUpdatesAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	store := slowIndex{&filestore.Store{Dir: dir + "/creds"}}
	exp := time.Now().Add(time.Hour)
	var wg sync.WaitGroup
	const n = 8
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &credcache.Cache{Now: time.Now, Store: store, LockDir: dir + "/locks"} // a process of its own
			if err := c.Put(context.Background(), fmt.Sprintf("k%d", i), "", cred(exp)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	list, err := (&credcache.Cache{Now: time.Now, Store: store}).List(context.Background())
	if err != nil || len(list) != n {
		t.Fatalf("the index lists %d of %d credentials (%v): updates were lost", len(list), n, err)
	}
}

// TestEvictionSparesAFreshValue: kubectl runs for two clusters at once.
// One finds its credential expired while the other is replacing it; neither
// the read nor the other cluster's index update may delete the new value
// (which would cost the user another exchange).
func TestEvictionSparesAFreshValue(t *testing.T) {
	c, clk, store := newCache(t)
	ctx := context.Background()
	if err := c.Put(ctx, "a", "cluster a", cred(clk.t.Add(time.Minute))); err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(2 * time.Minute)
	// A miss leaves the expired entry for the index to evict.
	if _, ok, _ := c.Get(ctx, "a"); ok {
		t.Fatal("an expired credential was handed out")
	}
	if _, err := store.Get(ctx, "a"); err != nil {
		t.Fatal("a read deleted an entry another process may be replacing")
	}
	// The fresh value lands before its index entry (as an earlier
	// version's writer did it); cluster b's update evicts a's stale index
	// entry but must keep the value.
	other := &credcache.Cache{Store: store, Now: clk.now}
	fresh := fmt.Sprintf(`{"version":1,"credential":{"clientCertificateData":"cert","clientKeyData":"key","expirationTimestamp":%q}}`,
		clk.t.Add(time.Hour).Format(time.RFC3339))
	if err := store.Set(ctx, "a", []byte(fresh)); err != nil {
		t.Fatal(err)
	}
	if err := other.Put(ctx, "b", "cluster b", cred(clk.t.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := c.Get(ctx, "a"); !ok {
		t.Fatal("the index update deleted a's fresh credential")
	}
}

// TestNoPlaceForLocks: where no lock can be taken (here a lock directory
// under a regular file), the index is kept under this process's own mutex
// and the credential is cached all the same.
func TestNoPlaceForLocks(t *testing.T) {
	c, clk, _ := newCache(t)
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c.LockDir = filepath.Join(file, "locks")
	ctx := context.Background()
	if err := c.Put(ctx, "k", "cluster a", cred(clk.t.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if list, err := c.List(ctx); err != nil || len(list) != 1 {
		t.Fatalf("index: %v %v", list, err)
	}
}

// recordingStore fails the test on any write: Peek only reads.
type recordingStore struct {
	cache.Store
	t *testing.T
}

func (s recordingStore) Set(context.Context, string, []byte) error {
	s.t.Error("Peek wrote")
	return nil
}

func (s recordingStore) Delete(context.Context, string) error {
	s.t.Error("Peek deleted")
	return nil
}

// TestPeekHasNoSideEffects: a corrupt entry is reported and left in place;
// a good one is returned; an expiring one is not found; nothing is written.
func TestPeekHasNoSideEffects(t *testing.T) {
	c, clk, store := newCache(t)
	ctx := context.Background()
	if err := c.Put(ctx, "good", "cluster a", cred(clk.t.Add(time.Minute))); err != nil {
		t.Fatal(err)
	}
	_ = store.Set(ctx, "bad", []byte("{{{"))
	peek := &credcache.Cache{Store: recordingStore{store, t}, Now: clk.now}
	if _, ok, err := peek.Peek(ctx, "bad"); ok || err != credcache.ErrUnreadable { //nolint:errorlint // the sentinel itself
		t.Errorf("corrupt: %v %v", ok, err)
	}
	if _, err := store.Get(ctx, "bad"); err != nil {
		t.Errorf("the corrupt entry is gone: %v", err)
	}
	if got, ok, err := peek.Peek(ctx, "good"); !ok || err != nil || got.ClientKeyData != "key" {
		t.Errorf("good: %v %v %v", got, ok, err)
	}
	if _, ok, err := peek.Peek(ctx, "missing"); ok || err != nil {
		t.Errorf("missing: %v %v", ok, err)
	}
	clk.t = clk.t.Add(31 * time.Second)
	if _, ok, err := peek.Peek(ctx, "good"); ok || err != nil {
		t.Errorf("expiring: %v %v", ok, err)
	}
}
