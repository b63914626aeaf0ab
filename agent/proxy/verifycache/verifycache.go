// Package verifycache remembers successful verifications of a credential
// (a client certificate chain, a signed token) so a busy client is not
// verified again on every request. It holds the one model the proxy's
// caches share: only successes are remembered, for at most a TTL, never past
// the credential's own expiry, and only under the trust they were reached
// under. Callers count changes of trust (trusted CAs, verify keys) in a
// generation; an entry from another generation is never returned.
package verifycache

import (
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/utils/lru"
)

// Cache maps a credential's key to the response its verification gave.
// It is safe for concurrent use.
type Cache[K comparable] struct {
	lru *lru.Cache
	ttl time.Duration
}

type entry struct {
	resp       *authenticator.Response
	generation uint64
	until      time.Time
}

// New makes a cache of at most size entries, each trusted for at most ttl.
func New[K comparable](size int, ttl time.Duration) *Cache[K] {
	return &Cache[K]{lru: lru.New(size), ttl: ttl}
}

// Get returns what was remembered for key, if it was verified under
// generation and has not run out at now. An entry that may no longer be
// used is dropped, so the next success replaces it.
func (c *Cache[K]) Get(key K, generation uint64, now time.Time) (*authenticator.Response, bool) {
	v, ok := c.lru.Get(key)
	if !ok {
		return nil, false
	}
	e := v.(*entry)
	// Wall-clock comparison: expiries come from certificates and tokens,
	// whose times carry no monotonic reading.
	if e.generation == generation && now.Round(0).Before(e.until) {
		return e.resp, true
	}
	c.lru.Remove(key)
	return nil, false
}

// Add remembers a successful verification of key, reached at now under
// generation, until the credential's own expiry until or the cache's TTL,
// whichever comes first. Only call it for successes: a refusal must be
// decided again each time, as the trust may change to accept it.
func (c *Cache[K]) Add(key K, resp *authenticator.Response, generation uint64, now, until time.Time) {
	if limit := now.Round(0).Add(c.ttl); until.After(limit) {
		until = limit
	}
	if !now.Round(0).Before(until) {
		return
	}
	c.lru.Add(key, &entry{resp: resp, generation: generation, until: until})
}
