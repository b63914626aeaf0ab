// Package index keeps a cache's list of what it stored: a JSON list under
// one key of a cache.Store. Keyrings cannot enumerate, so a cache that must
// list or forget everything (status, logout --all) keeps its own list.
// Every pinniped process reads and rewrites it, so a rewrite holds the
// index's lock across processes.
package index

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/pinniped-kit/pinniped/cache"
	"github.com/pinniped-kit/pinniped/cache/lock"
)

// List is the index of E kept under Key in Store.
type List[E any] struct {
	Store cache.Store
	Key   string
	// LockDir holds the lock every process takes to rewrite the list; ""
	// (or a place no lock can be made) leaves only this process's own
	// rewrites serialised.
	LockDir string
	// What names the index in errors ("the credential index").
	What string

	mu sync.Mutex
}

// Read is the list. A missing index is empty, and so is a corrupt one,
// which the next rewrite replaces; any other failure of the store is an
// error, never an empty list: Update would write the empty list back and
// orphan every entry it named (refresh tokens no logout could then find).
func (l *List[E]) Read(ctx context.Context) ([]E, error) {
	raw, err := l.Store.Get(ctx, l.Key)
	if errors.Is(err, cache.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", l.What, err)
	}
	var list []E
	if json.Unmarshal(raw, &list) != nil {
		return nil, nil //nolint:nilerr // a corrupt index is empty; the next rewrite replaces it
	}
	return list, nil
}

// Update reads the list and writes what fn makes of it, holding the lock
// throughout; a nil list removes the index. When fn fails nothing is
// written. The lock's wait is bounded whatever ctx's deadline (logout and
// status have none): a stopped process must not wedge every later one.
func (l *List[E]) Update(ctx context.Context, fn func([]E) ([]E, error)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	release, _, err := lock.Hold(ctx, l.LockDir, l.Key, lock.IndexWait)
	if err != nil {
		return fmt.Errorf("lock %s: %w", l.What, err)
	}
	defer release()
	list, err := l.Read(ctx)
	if err != nil {
		return err
	}
	if list, err = fn(list); err != nil {
		return err
	}
	if list == nil {
		return l.Store.Delete(ctx, l.Key)
	}
	b, err := json.Marshal(list)
	if err != nil {
		return err
	}
	return l.Store.Set(ctx, l.Key, b)
}
