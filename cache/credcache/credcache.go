// Package credcache caches short-lived cluster credentials (what `pinniped
// login` prints for kubectl) in a cache.Store, under the keys the login
// model derives (cli/login/config), and never hands out one that is about to
// expire.
package credcache

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/pinniped-kit/pinniped/cache"
	"github.com/pinniped-kit/pinniped/cache/index"
)

// DefaultSkew: a credential expiring sooner than this is treated as expired,
// so kubectl never sends one that dies in flight or on a slightly fast
// API-server clock.
const DefaultSkew = 30 * time.Second

// MaxEntries bounds the index; the oldest entries are evicted first.
const MaxEntries = 64

// indexKey names the list of live entries; keyrings cannot enumerate.
const indexKey = "pinniped-credcache-index"

// Credential is the part of an ExecCredential status pinniped caches.
type Credential struct {
	Token                 string    `json:"token,omitempty"`
	ClientCertificateData string    `json:"clientCertificateData,omitempty"`
	ClientKeyData         string    `json:"clientKeyData,omitempty"`
	ExpirationTimestamp   time.Time `json:"expirationTimestamp"`
}

type entry struct {
	Version    int        `json:"version"`
	Credential Credential `json:"credential"`
	Created    time.Time  `json:"created"`
	// Label is a human-readable description for `pinniped status`, never secret.
	Label string `json:"label,omitempty"`
}

type indexEntry struct {
	Key   string `json:"key"`
	Label string `json:"label,omitempty"`
	// Session is the key of the OIDC session the credential came from
	// ("" for a static token's), so status can group them.
	Session string    `json:"session,omitempty"`
	Expires time.Time `json:"expires"`
	Created time.Time `json:"created"`
}

// Cache reads and writes credentials.
type Cache struct {
	Store cache.Store
	// Now is the clock, required (time.Now but in tests).
	Now  func() time.Time
	Skew time.Duration
	// LockDir holds the lock that serialises index updates across
	// processes (kubectl runs many at once); without it, only this
	// process's own updates are serialised.
	LockDir string

	once sync.Once
	idx  *index.List[indexEntry]
}

// index is the list of what the cache holds (made once: it holds the
// mutex that serialises this process's own rewrites).
func (c *Cache) index() *index.List[indexEntry] {
	c.once.Do(func() {
		c.idx = &index.List[indexEntry]{Store: c.Store, Key: indexKey, LockDir: c.LockDir, What: "the credential index"}
	})
	return c.idx
}

func (c *Cache) skew() time.Duration {
	if c.Skew > 0 {
		return c.Skew
	}
	return DefaultSkew
}

// Get returns a credential valid for longer than the skew, or false. Corrupt
// or expired entries are removed.
func (c *Cache) Get(ctx context.Context, key string) (*Credential, bool, error) {
	cred, ok, err := c.Peek(ctx, key)
	if errors.Is(err, ErrUnreadable) {
		_ = c.Store.Delete(ctx, key)
		return nil, false, nil // a corrupt entry is a miss, never a failure
	}
	return cred, ok, err
}

// ErrUnreadable is Peek's answer for an entry that is there but is not a
// credential this version can use (corrupt, another format).
var ErrUnreadable = errors.New("the cached entry is unreadable")

// Peek is Get without side effects, for diagnosis (pinniped doctor): it
// never deletes or writes, and reports a corrupt entry as ErrUnreadable
// instead of removing it. Like Get, an entry expiring within the skew is
// not found.
func (c *Cache) Peek(ctx context.Context, key string) (*Credential, bool, error) {
	raw, err := c.Store.Get(ctx, key)
	if errors.Is(err, cache.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	e, err := decodeEntry(raw)
	if err != nil || e.Version != 1 || !usable(&e.Credential) {
		return nil, false, ErrUnreadable
	}
	// An expired entry is a miss but stays: the engine may be writing its
	// successor right now (kubectl runs many at once), and deleting here
	// without the index lock could remove that. The index evicts it.
	if !e.Credential.ExpirationTimestamp.After(c.Now().Add(c.skew())) {
		return nil, false, nil
	}
	return &e.Credential, true, nil
}

func usable(cr *Credential) bool {
	return !cr.ExpirationTimestamp.IsZero() &&
		(cr.Token != "" || (cr.ClientCertificateData != "" && cr.ClientKeyData != ""))
}

// Put stores a credential and records it in the index, evicting expired and
// excess entries.
func (c *Cache) Put(ctx context.Context, key, label string, cred Credential) error {
	return c.PutFrom(ctx, key, label, "", cred)
}

// PutFrom is Put for a credential made from the OIDC session under
// session (a sessions key), which the index records beside it.
func (c *Cache) PutFrom(ctx context.Context, key, label, session string, cred Credential) error {
	if !usable(&cred) {
		return errors.New("refusing to cache a credential without an expiry or secret")
	}
	now := c.Now()
	b, err := json.Marshal(entry{Version: 1, Credential: cred, Created: now, Label: label})
	if err != nil {
		return err
	}
	// The value is written under the index lock, so a process evicting
	// the expired entry it replaces cannot delete it in between.
	return c.updateIndex(ctx, func(idx []indexEntry) ([]indexEntry, error) {
		if err := c.Store.Set(ctx, key, b); err != nil {
			return nil, err
		}
		return append(without(idx, key), indexEntry{Key: key, Label: label, Session: session, Expires: cred.ExpirationTimestamp, Created: now}), nil
	})
}

// freshValue reports whether the value under key is a credential that has
// not expired: an index entry can be older than its value (a writer of an
// earlier version wrote the value outside the lock), and such a value is
// not evicted with the entry.
func (c *Cache) freshValue(ctx context.Context, key string, now time.Time) bool {
	raw, err := c.Store.Get(ctx, key)
	if err != nil {
		return false
	}
	e, err := decodeEntry(raw)
	return err == nil && usable(&e.Credential) && e.Credential.ExpirationTimestamp.After(now)
}

func without(idx []indexEntry, key string) []indexEntry {
	out := idx[:0]
	for _, e := range idx {
		if e.Key != key {
			out = append(out, e)
		}
	}
	return out
}

// Delete removes one credential.
func (c *Cache) Delete(ctx context.Context, key string) error {
	if err := c.Store.Delete(ctx, key); err != nil {
		return err
	}
	return c.updateIndex(ctx, func(idx []indexEntry) ([]indexEntry, error) { return without(idx, key), nil })
}

// Entry describes a cached credential without its secrets.
type Entry struct {
	Key     string
	Label   string
	Session string
	Expires time.Time
	Created time.Time
}

// List returns the live entries, soonest expiry first.
func (c *Cache) List(ctx context.Context) ([]Entry, error) {
	idx, err := c.index().Read(ctx)
	if err != nil {
		return nil, err
	}
	now := c.Now()
	var out []Entry
	for _, e := range idx {
		if e.Expires.After(now) {
			out = append(out, Entry(e))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Expires.Before(out[j].Expires) })
	return out, nil
}

// Clear removes every credential in the index.
func (c *Cache) Clear(ctx context.Context) (int, error) {
	n := 0
	err := c.index().Update(ctx, func(idx []indexEntry) ([]indexEntry, error) {
		for _, e := range idx {
			if err := c.Store.Delete(ctx, e.Key); err != nil {
				return nil, err
			}
		}
		n = len(idx)
		return nil, nil
	})
	return n, err
}

// updateIndex applies fn, then drops expired entries and caps the size,
// deleting the values of everything it drops.
func (c *Cache) updateIndex(ctx context.Context, fn func([]indexEntry) ([]indexEntry, error)) error {
	return c.index().Update(ctx, func(idx []indexEntry) ([]indexEntry, error) {
		idx, err := fn(idx)
		if err != nil {
			return nil, err
		}
		now := c.Now()
		keep := idx[:0]
		var drop []string
		for _, e := range idx {
			if e.Expires.After(now) {
				keep = append(keep, e)
			} else {
				drop = append(drop, e.Key)
			}
		}
		sort.SliceStable(keep, func(i, j int) bool { return keep[i].Created.Before(keep[j].Created) })
		for _, k := range drop {
			if !c.freshValue(ctx, k, now) {
				_ = c.Store.Delete(ctx, k)
			}
		}
		for len(keep) > MaxEntries {
			_ = c.Store.Delete(ctx, keep[0].Key)
			keep = keep[1:]
		}
		if keep == nil {
			keep = []indexEntry{} // an empty index ([]), not none: only Clear removes it
		}
		return keep, nil
	})
}
