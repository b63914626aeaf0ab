package index_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/pinniped-kit/pinniped/cache/filestore"
	"github.com/pinniped-kit/pinniped/cache/index"
)

// TestConcurrentUpdatesKeepEveryEntry: two lists over the same store and
// lock directory (two processes, as far as the lock knows) and many
// goroutines each add an entry; none is lost.
func TestConcurrentUpdatesKeepEveryEntry(t *testing.T) {
	dir := t.TempDir()
	store := &filestore.Store{Dir: filepath.Join(dir, "store")}
	lists := []*index.List[string]{
		{Store: store, Key: "idx", LockDir: filepath.Join(dir, "locks"), What: "the test index"},
		{Store: store, Key: "idx", LockDir: filepath.Join(dir, "locks"), What: "the test index"},
	}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := lists[i%2].Update(context.Background(), func(l []string) ([]string, error) {
				return append(l, fmt.Sprint(i)), nil
			}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got, err := lists[0].Read(context.Background())
	if err != nil || len(got) != 40 {
		t.Fatalf("%d entries (%v), want 40", len(got), err)
	}
}

// TestCorruptIndexIsEmpty: a corrupt index reads as empty and is replaced
// by the next update; a failed update writes nothing; nil removes it.
func TestCorruptIndexIsEmpty(t *testing.T) {
	ctx := context.Background()
	store := &filestore.Store{Dir: filepath.Join(t.TempDir(), "store")}
	l := &index.List[string]{Store: store, Key: "idx", What: "the test index"}
	if err := store.Set(ctx, "idx", []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Read(ctx); err != nil || got != nil {
		t.Fatalf("a corrupt index: %v, %v", got, err)
	}
	if err := l.Update(ctx, func(x []string) ([]string, error) { return append(x, "a"), nil }); err != nil {
		t.Fatal(err)
	}
	if err := l.Update(ctx, func([]string) ([]string, error) { return nil, fmt.Errorf("no") }); err == nil {
		t.Fatal("a failing update reported no error")
	}
	if got, _ := l.Read(ctx); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after a failed update: %v", got)
	}
	if err := l.Update(ctx, func([]string) ([]string, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Read(ctx); err != nil || got != nil {
		t.Fatalf("after removal: %v, %v", got, err)
	}
}
