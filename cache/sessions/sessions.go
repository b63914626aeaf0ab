// Package sessions caches OIDC sessions (the ID, access and refresh tokens
// of a login) in a cache.Store, beside the cluster credentials package
// credcache keeps, and lists them so every one can be forgotten at once:
// keyrings cannot enumerate. Keys come from the login model
// (config.OIDC.SessionKey).
package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/pinniped-kit/pinniped/cache"
	"github.com/pinniped-kit/pinniped/cache/index"
	"github.com/pinniped-kit/pinniped/cache/privatedir"
)

// Tokens are what a login yields, and what a session keeps.
type Tokens struct {
	IDToken           string    `json:"idToken"`
	IDTokenExpiry     time.Time `json:"idTokenExpiry"`
	AccessToken       string    `json:"accessToken,omitempty"`
	AccessTokenExpiry time.Time `json:"accessTokenExpiry,omitzero"`
	RefreshToken      string    `json:"refreshToken,omitempty"`
	// Username and Groups are read from the verified ID token, for display.
	Username string   `json:"username,omitempty"`
	Groups   []string `json:"groups,omitempty"`
	// Issuer is the login the tokens came from, so that `pinniped logout
	// --all`, which has no kubeconfig to read it from, can revoke them
	// there. Nil in sessions cached before it was recorded.
	Issuer *Issuer `json:"issuer,omitempty"`
}

// Issuer is what revoking a session at its issuer needs, and what the
// session itself can keep: the client secret (of --client-secret) stays in
// the kubeconfig, and HasClientSecret only says there is one.
type Issuer struct {
	URL      string `json:"url"`
	ClientID string `json:"clientID"`
	// CABundle is the issuer's CA (PEM) as the login trusted it; empty
	// means the system's roots.
	CABundle        []byte `json:"caBundle,omitempty"`
	HasClientSecret bool   `json:"hasClientSecret,omitempty"`
}

// indexKey names the list of session keys.
const indexKey = "pinniped-session-index"

// MaxEntries bounds the index; the oldest sessions are forgotten first.
const MaxEntries = 64

// Cache reads and writes sessions.
type Cache struct {
	Store cache.Store
	// LockDir holds the lock that serialises index updates across
	// processes; without it, only this process's own are serialised.
	LockDir string

	once sync.Once
	idx  *index.List[string]
}

// index is the list of session keys (made once: it holds the mutex that
// serialises this process's own rewrites).
func (c *Cache) index() *index.List[string] {
	c.once.Do(func() {
		c.idx = &index.List[string]{Store: c.Store, Key: indexKey, LockDir: c.LockDir, What: "the session index"}
	})
	return c.idx
}

// Load returns the session under key, or nil. A corrupt one is removed:
// never a crash, at worst a new login. A store refusing to read (a
// directory or file that breaks the private-directory rule) is an error:
// a login over it would replace what is there without the person
// learning why. Any other failure is no session.
func (c *Cache) Load(ctx context.Context, key string) (*Tokens, error) {
	raw, err := c.Store.Get(ctx, key)
	switch {
	case errors.Is(err, privatedir.ErrNotPrivate):
		return nil, err
	case err != nil:
		return nil, nil //nolint:nilerr // at worst a new login
	}
	var t Tokens
	if json.Unmarshal(raw, &t) != nil {
		_ = c.Store.Delete(ctx, key)
		return nil, nil //nolint:nilerr // a corrupt session is removed: at worst a new login
	}
	return &t, nil
}

// Put lists a session, then saves it: a session is never saved unlisted
// (logout --all could not find it), and a listed key without a value is
// only skipped.
func (c *Cache) Put(ctx context.Context, key string, t *Tokens) error {
	b, err := json.Marshal(t) //nolint:gosec // the session goes to the secret store (keyring or 0600 file) on purpose
	if err != nil {
		return err
	}
	if err := c.updateIndex(ctx, func(keys []string) ([]string, []string) {
		if slices.Contains(keys, key) {
			return keys, nil
		}
		keys = append(keys, key)
		if len(keys) > MaxEntries {
			return keys[1:], keys[:1]
		}
		return keys, nil
	}); err != nil {
		return err
	}
	return c.Store.Set(ctx, key, b)
}

// Delete forgets one session. It reports whether there was one.
func (c *Cache) Delete(ctx context.Context, key string) (bool, error) {
	_, err := c.Store.Get(ctx, key)
	existed := err == nil
	if err := c.Store.Delete(ctx, key); err != nil {
		return existed, err
	}
	return existed, c.updateIndex(ctx, func(keys []string) ([]string, []string) {
		return slices.DeleteFunc(keys, func(k string) bool { return k == key }), nil
	})
}

// Clear forgets every listed session and returns how many there were.
func (c *Cache) Clear(ctx context.Context) (int, error) {
	n := 0
	err := c.updateIndex(ctx, func(keys []string) ([]string, []string) {
		n = len(keys)
		return nil, keys
	})
	return n, err
}

// Keys lists the sessions. An index that cannot be read is an error, not
// an empty list: logout --all must not report success over sessions it
// could not see.
func (c *Cache) Keys(ctx context.Context) ([]string, error) {
	return c.index().Read(ctx)
}

// updateIndex applies fn, which returns the new list and the sessions to
// delete. Every deletion is tried; their failures are returned with the
// index's.
func (c *Cache) updateIndex(ctx context.Context, fn func([]string) (keep, drop []string)) error {
	var errs []error
	err := c.index().Update(ctx, func(keys []string) ([]string, error) {
		keep, drop := fn(keys)
		for _, k := range drop {
			if err := c.Store.Delete(ctx, k); err != nil {
				errs = append(errs, err)
			}
		}
		return keep, nil
	})
	return errors.Join(append(errs, err)...)
}
