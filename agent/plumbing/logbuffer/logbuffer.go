// Package logbuffer batches log lines before they reach stderr. In a pod,
// every write to stderr is a system call and then a trip through the
// container runtime's log pipeline (containerd-shim and containerd each read
// and write it again): with an audit line per exchange, that was as much CPU
// as the agent's own certificate signing. Batching lines written within a
// few milliseconds into one write cuts the cost to a fraction, at the price
// of lines reaching the log up to that much later.
package logbuffer

import (
	"io"
	"sync"
	"time"
)

// Writer buffers whole writes (slog writes one line per call) and passes
// them on in order, at most Delay after they arrived, or at once when
// MaxBuffered bytes are waiting.
type Writer struct {
	out   io.Writer
	delay time.Duration
	max   int

	mu      sync.Mutex
	buf     []byte
	spare   []byte // the last batch written, kept for the next one
	timer   *time.Timer
	closed  bool
	writeMu sync.Mutex // taken before mu; keeps batches in order on out
}

// Defaults: short enough that a person tailing the log sees no delay,
// long enough to batch a busy second's lines into tens of writes.
const (
	DefaultDelay = 20 * time.Millisecond
	MaxBuffered  = 64 << 10
)

// New returns a Writer in front of out.
func New(out io.Writer, delay time.Duration) *Writer {
	return &Writer{out: out, delay: delay, max: MaxBuffered}
}

// Write queues p. Once closed, it writes through.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return w.writeOut(p)
	}
	w.buf = append(w.buf, p...)
	if len(w.buf) >= w.max {
		w.mu.Unlock()
		// p was taken either way; err says the batch it went out in failed.
		return len(p), w.Flush()
	}
	if w.timer == nil {
		w.timer = time.AfterFunc(w.delay, func() { _ = w.Flush() })
	}
	w.mu.Unlock()
	return len(p), nil
}

// take hands over the buffered lines; w.mu must be held.
func (w *Writer) take() []byte {
	batch := w.buf
	w.buf, w.spare = w.spare, nil
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	return batch
}

func (w *Writer) writeOut(b []byte) (int, error) {
	w.writeMu.Lock()
	defer w.writeMu.Unlock()
	return w.out.Write(b)
}

// Flush writes whatever is waiting. Batches are taken and written under
// writeMu, so they reach out in the order their lines arrived.
func (w *Writer) Flush() error {
	return w.flush(false)
}

// Close flushes and makes later writes go straight through, so lines
// logged during shutdown are never stranded.
func (w *Writer) Close() error {
	return w.flush(true)
}

func (w *Writer) flush(closing bool) error {
	w.writeMu.Lock()
	defer w.writeMu.Unlock()
	w.mu.Lock()
	if closing {
		w.closed = true
	}
	batch := w.take()
	w.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	_, err := w.out.Write(batch)
	// An io.Writer keeps nothing of what it was given: the batch's memory
	// takes the next lines, instead of a new buffer grown for each batch.
	if cap(batch) <= 2*w.max {
		w.mu.Lock()
		w.spare = batch[:0]
		w.mu.Unlock()
	}
	return err
}
