package verifycache_test

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/verifycache"
)

func response(name string) *authenticator.Response {
	return &authenticator.Response{User: &user.DefaultInfo{Name: name}}
}

func TestCacheHoldsAtMostTheTTL(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	c := verifycache.New[string](8, time.Minute)
	c.Add("alice", response("alice"), 1, now, now.Add(time.Hour))
	if r, ok := c.Get("alice", 1, now.Add(59*time.Second)); !ok || r.User.GetName() != "alice" {
		t.Fatalf("a fresh entry was not returned: %v", ok)
	}
	if _, ok := c.Get("alice", 1, now.Add(time.Minute)); ok {
		t.Fatal("an entry outlived the cache's TTL")
	}
	if _, ok := c.Get("alice", 1, now); ok {
		t.Fatal("an entry that ran out was kept")
	}
}

func TestCacheNeverOutlivesTheCredential(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	c := verifycache.New[string](8, time.Minute)
	c.Add("alice", response("alice"), 1, now, now.Add(10*time.Second))
	if _, ok := c.Get("alice", 1, now.Add(9*time.Second)); !ok {
		t.Fatal("an entry was dropped before the credential expired")
	}
	if _, ok := c.Get("alice", 1, now.Add(10*time.Second)); ok {
		t.Fatal("an entry outlived the credential's own expiry")
	}
	c.Add("bob", response("bob"), 1, now, now)
	c.Add("carol", response("carol"), 1, now, now.Add(-time.Second))
	for _, k := range []string{"bob", "carol"} {
		if _, ok := c.Get(k, 1, now.Add(-time.Hour)); ok {
			t.Fatalf("%s: a credential already expired when it was verified was remembered", k)
		}
	}
}

func TestCacheOnlyUnderTheSameGeneration(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	c := verifycache.New[[32]byte](8, time.Minute)
	key := [32]byte{1}
	c.Add(key, response("alice"), 1, now, now.Add(time.Hour))
	if _, ok := c.Get(key, 2, now); ok {
		t.Fatal("an entry verified under other trust was returned")
	}
	// The entry is gone, not just hidden: going back to generation 1
	// (trust changed twice) still verifies again.
	if _, ok := c.Get(key, 1, now); ok {
		t.Fatal("a stale entry was kept")
	}
	if _, ok := c.Get([32]byte{2}, 1, now); ok {
		t.Fatal("an unknown key was found")
	}
}

// Monotonic clock readings must not decide: expiries are wall-clock.
func TestCacheComparesWallClock(t *testing.T) {
	now := time.Now() // carries a monotonic reading
	c := verifycache.New[string](8, time.Minute)
	c.Add("alice", response("alice"), 0, now, now.Round(0).Add(time.Second))
	if _, ok := c.Get("alice", 0, now); !ok {
		t.Fatal("a fresh entry was not returned")
	}
	if _, ok := c.Get("alice", 0, now.Add(time.Second)); ok {
		t.Fatal("an entry outlived its wall-clock expiry")
	}
}

func TestCacheIsBounded(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	c := verifycache.New[int](2, time.Minute)
	for i := range 3 {
		c.Add(i, response("u"), 0, now, now.Add(time.Hour))
	}
	if _, ok := c.Get(0, 0, now); ok {
		t.Fatal("the least recently used entry was not evicted")
	}
	for i := 1; i < 3; i++ {
		if _, ok := c.Get(i, 0, now); !ok {
			t.Fatalf("entry %d was evicted", i)
		}
	}
}

var errBadSignature = errors.New("bad signature")

// TestRefusalsHoldTheirTTL: a refusal is returned, the same error, for its
// TTL from when it was decided, and only under its generation.
func TestRefusalsHoldTheirTTL(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	r := verifycache.NewRefusals[string](8, 10*time.Second)
	if err := r.Get("forged", 1, now); err != nil {
		t.Fatalf("an unknown key was refused: %v", err)
	}
	r.Add("forged", errBadSignature, 1, now)
	if err := r.Get("forged", 1, now.Add(9*time.Second)); !errors.Is(err, errBadSignature) {
		t.Fatalf("a fresh refusal: %v", err)
	}
	if err := r.Get("forged", 1, now.Add(10*time.Second)); err != nil {
		t.Fatalf("a refusal outlived its TTL: %v", err)
	}
	r.Add("forged", errBadSignature, 1, now)
	if err := r.Get("forged", 2, now); err != nil {
		t.Fatalf("a refusal under other trust was returned: %v", err)
	}
	if err := r.Get("forged", 1, now); err != nil {
		t.Fatalf("a refusal of another generation was kept: %v", err)
	}
	r.Add("nothing", nil, 1, now)
	if err := r.Get("nothing", 1, now); err != nil {
		t.Fatalf("a nil error was remembered as %v", err)
	}
}

// TestRefusalsAreBoundedApartFromSuccesses: a flood of refusals evicts
// only other refusals.
func TestRefusalsAreBoundedApartFromSuccesses(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	c := verifycache.New[int](2, time.Minute)
	r := verifycache.NewRefusals[int](2, 10*time.Second)
	c.Add(0, response("alice"), 0, now, now.Add(time.Hour))
	for i := range 100 {
		r.Add(i, errBadSignature, 0, now)
	}
	if _, ok := c.Get(0, 0, now); !ok {
		t.Fatal("refusals evicted a success")
	}
	if r.Get(0, 0, now) != nil || r.Get(99, 0, now) == nil {
		t.Fatal("the refusals are not an LRU of their own size")
	}
}
