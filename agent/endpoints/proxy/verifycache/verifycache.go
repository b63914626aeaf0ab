// Package verifycache remembers verifications of a credential (a client
// certificate chain, a signed token) so a busy client is not verified
// again on every request, nor a client that repeats a refused credential.
// It holds the one model the proxy's caches share: an outcome is
// remembered for at most a TTL, never past the credential's own expiry,
// and only under the trust it was reached under. Callers count changes of
// trust (trusted CAs, verify keys) in a generation; an entry from another
// generation is never returned.
//
// Successes (Cache) and refusals (Refusals) are kept in separate caches of
// their own sizes: anyone can send distinct bad credentials without end,
// and they must only ever push out other refusals, never a client's
// success.
package verifycache

import (
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/utils/lru"
)

// Cache maps a credential's key to the response its verification gave.
// It is safe for concurrent use.
type Cache[K comparable] struct {
	s store[K, *authenticator.Response]
}

// New makes a cache of at most size entries, each trusted for at most ttl.
func New[K comparable](size int, ttl time.Duration) *Cache[K] {
	return &Cache[K]{s: newStore[K, *authenticator.Response](size, ttl)}
}

// Get returns what was remembered for key, if it was verified under
// generation and has not run out at now. An entry that may no longer be
// used is dropped, so the next success replaces it.
func (c *Cache[K]) Get(key K, generation uint64, now time.Time) (*authenticator.Response, bool) {
	return c.s.get(key, generation, now)
}

// Add remembers a successful verification of key, reached at now under
// generation, until the credential's own expiry until or the cache's TTL,
// whichever comes first. Only call it for successes: refusals go in
// Refusals, whose TTL is much shorter.
func (c *Cache[K]) Add(key K, resp *authenticator.Response, generation uint64, now, until time.Time) {
	c.s.add(key, resp, generation, now, until)
}

// Refusals maps a credential's key to the error its verification was
// refused with, so that a credential sent again and again (a forged token
// in a loop, a client that keeps an expired one) costs one verification
// per TTL, not one per request. It is safe for concurrent use.
//
// A refusal is safe to reuse only while nothing could turn it into an
// acceptance: a change of trust cannot (the generation drops the entry),
// and the TTL bounds everything else. So the TTL must be short, and a
// refusal that time alone ends (a credential not valid yet) is better not
// remembered at all.
type Refusals[K comparable] struct {
	s store[K, error]
}

// NewRefusals makes a cache of at most size refusals, each kept for ttl.
func NewRefusals[K comparable](size int, ttl time.Duration) *Refusals[K] {
	return &Refusals[K]{s: newStore[K, error](size, ttl)}
}

// Get returns the error key was refused with, if it was refused under
// generation and the refusal has not run out at now; otherwise nil, and
// the credential must be verified.
func (r *Refusals[K]) Get(key K, generation uint64, now time.Time) error {
	err, _ := r.s.get(key, generation, now)
	return err
}

// Add remembers that key was refused with err, decided at now under
// generation, for the TTL. A nil err is not remembered.
func (r *Refusals[K]) Add(key K, err error, generation uint64, now time.Time) {
	if err == nil {
		return
	}
	r.s.add(key, err, generation, now, now.Round(0).Add(r.s.ttl))
}

// store is the model both caches share.
type store[K comparable, V any] struct {
	lru *lru.Cache
	ttl time.Duration
}

type entry[V any] struct {
	v          V
	generation uint64
	until      time.Time
}

func newStore[K comparable, V any](size int, ttl time.Duration) store[K, V] {
	return store[K, V]{lru: lru.New(size), ttl: ttl}
}

// get returns the entry for key if it was reached under generation and
// has not run out at now, and drops one that may no longer be used.
func (s *store[K, V]) get(key K, generation uint64, now time.Time) (V, bool) {
	var zero V
	v, ok := s.lru.Get(key)
	if !ok {
		return zero, false
	}
	e := v.(*entry[V])
	// Wall-clock comparison: expiries come from certificates and tokens,
	// whose times carry no monotonic reading.
	if e.generation == generation && now.Round(0).Before(e.until) {
		return e.v, true
	}
	s.lru.Remove(key)
	return zero, false
}

// add keeps v until until or the TTL from now, whichever comes first, and
// not at all if that is already past.
func (s *store[K, V]) add(key K, v V, generation uint64, now, until time.Time) {
	if limit := now.Round(0).Add(s.ttl); until.After(limit) {
		until = limit
	}
	if !now.Round(0).Before(until) {
		return
	}
	s.lru.Add(key, &entry[V]{v: v, generation: generation, until: until})
}
