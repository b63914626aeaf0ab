// Package progress reports the steps of a long wait to a person. Plain is
// one line per event, for logs and non-terminals; the interactive renderer
// builds on the same interface.
package progress

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Plain writes "• step" when a step starts and "✓ step (1.2s)" when it ends.
type Plain struct {
	W   io.Writer
	Now func() time.Time

	mu    sync.Mutex
	start time.Time
}

func (p *Plain) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// Step announces a step.
func (p *Plain) Step(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.start = p.now()
	fmt.Fprintf(p.W, "• %s\n", msg)
}

// Done reports the end of a step.
func (p *Plain) Done(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.start.IsZero() {
		fmt.Fprintf(p.W, "✓ %s\n", msg)
		return
	}
	fmt.Fprintf(p.W, "✓ %s (%.1fs)\n", msg, p.now().Sub(p.start).Seconds())
	p.start = time.Time{}
}
