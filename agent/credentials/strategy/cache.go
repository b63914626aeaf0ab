package strategy

import (
	"context"
	"sync"
	"time"
)

// CachedSuccess reuses a successful probe for ttl, for probes that cost
// something each time (the CSR strategy's creates a CSR): the controller
// probes every few seconds while another strategy is Pending. Failures
// are always probed again, so a strategy that starts working shows at once.
func CachedSuccess(ttl time.Duration, probe func(context.Context) (*Working, error)) func(context.Context) (*Working, error) {
	var mu sync.Mutex
	var okUntil time.Time
	var last *Working
	return func(ctx context.Context) (*Working, error) {
		mu.Lock()
		defer mu.Unlock()
		if time.Now().Before(okUntil) {
			return last, nil
		}
		w, err := probe(ctx)
		if err == nil {
			okUntil, last = time.Now().Add(ttl), w
		}
		return w, err
	}
}
