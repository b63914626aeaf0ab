package plain

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Steps reports a long wait's steps: "• step" when a step starts and
// "✓ step (1.2s)" when it ends.
type Steps struct {
	W io.Writer
	// Now is the clock, required.
	Now func() time.Time

	mu    sync.Mutex
	start time.Time
}

// Step announces a step.
func (p *Steps) Step(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.start = p.Now()
	fmt.Fprintf(p.W, "• %s\n", msg)
}

// Done reports the end of a step.
func (p *Steps) Done(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.start.IsZero() {
		fmt.Fprintf(p.W, "✓ %s\n", msg)
		return
	}
	fmt.Fprintf(p.W, "✓ %s (%.1fs)\n", msg, p.Now().Sub(p.start).Seconds())
	p.start = time.Time{}
}
