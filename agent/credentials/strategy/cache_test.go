package strategy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/agent/credentials/strategy"
)

// TestCachedSuccess: a working CSR probe is not repeated within its ttl (each
// one creates a CSR); a failing one is asked again every time.
func TestCachedSuccess(t *testing.T) {
	calls := 0
	probe := strategy.CachedSuccess(time.Hour, func(context.Context) (*strategy.Working, error) {
		calls++
		return nil, nil
	})
	for range 3 {
		if _, err := probe(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 1 {
		t.Fatalf("%d probes within the ttl", calls)
	}
	failing := strategy.CachedSuccess(time.Hour, func(context.Context) (*strategy.Working, error) {
		calls++
		return nil, errors.New("no signer")
	})
	calls = 0
	for range 3 {
		_, _ = failing(context.Background())
	}
	if calls != 3 {
		t.Fatalf("failures cached: %d probes", calls)
	}
}
