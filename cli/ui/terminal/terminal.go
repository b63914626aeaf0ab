// Package terminal reports the steps of a long wait on a terminal without
// the keyboard: the running step on one line with a spinner, redrawn in
// place.
package terminal

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Steps shows the running step on one line with a spinner and the time
// spent, redrawn in place; finished steps stay as "✓" lines. Use it only
// when the writer is a terminal (NO_COLOR and TERM=dumb get plain lines).
type Steps struct {
	W        io.Writer
	Interval time.Duration // redraw period; default 100ms

	mu      sync.Mutex
	step    string
	started time.Time
	frame   int
	stop    chan struct{}
	done    chan struct{}
}

var frames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// Step starts a step and its spinner.
func (t *Steps) Step(msg string) {
	t.finish()
	t.mu.Lock()
	t.step, t.started, t.frame = msg, time.Now(), 0
	t.stop, t.done = make(chan struct{}), make(chan struct{})
	stop, done := t.stop, t.done
	t.drawLocked()
	t.mu.Unlock()
	interval := t.Interval
	if interval == 0 {
		interval = 100 * time.Millisecond
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				t.mu.Lock()
				t.frame++
				t.drawLocked()
				t.mu.Unlock()
			}
		}
	}()
}

// Done ends the running step (if any) and prints msg as finished.
func (t *Steps) Done(msg string) {
	elapsed := t.finish()
	t.mu.Lock()
	defer t.mu.Unlock()
	if elapsed > 0 {
		fmt.Fprintf(t.W, "\r\033[K✓ %s (%.1fs)\n", msg, elapsed.Seconds())
		return
	}
	fmt.Fprintf(t.W, "\r\033[K✓ %s\n", msg)
}

// finish stops the spinner and returns how long the step ran.
func (t *Steps) finish() time.Duration {
	t.mu.Lock()
	stop, done, started := t.stop, t.done, t.started
	t.stop, t.done, t.step = nil, nil, ""
	t.mu.Unlock()
	if stop == nil {
		return 0
	}
	close(stop)
	<-done
	return time.Since(started)
}

func (t *Steps) drawLocked() {
	if t.step == "" {
		return
	}
	fmt.Fprintf(t.W, "\r\033[K%s %s (%ds)", frames[t.frame%len(frames)], t.step, int(time.Since(t.started).Seconds()))
}
