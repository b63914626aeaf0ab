package logbuffer_test

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/agent/plumbing/logbuffer"
)

// sink records each write it receives.
type sink struct {
	mu     sync.Mutex
	writes int
	buf    bytes.Buffer
}

func (s *sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	return s.buf.Write(p)
}

func (s *sink) snapshot() (string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String(), s.writes
}

func TestLinesArriveBatchedAndInOrder(t *testing.T) {
	out := &sink{}
	w := logbuffer.New(out, 20*time.Millisecond)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				_, _ = fmt.Fprintf(w, "g%d %d\n", g, i)
			}
		}()
	}
	wg.Wait()
	// No Flush: the timer alone must deliver everything.
	deadline := time.Now().Add(5 * time.Second)
	var text string
	var writes int
	for time.Now().Before(deadline) {
		if text, writes = out.snapshot(); strings.Count(text, "\n") == 4000 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) != 4000 {
		t.Fatalf("%d lines arrived, want 4000", len(lines))
	}
	next := map[string]int{}
	for _, l := range lines {
		var g string
		var i int
		if _, err := fmt.Sscanf(l, "%s %d", &g, &i); err != nil || next[g] != i {
			t.Fatalf("line %q out of order or torn (want %s %d)", l, g, next[g])
		}
		next[g]++
	}
	if writes >= 4000/10 {
		t.Errorf("%d writes for 4000 lines: not batched", writes)
	}
}

func TestFullBufferIsWrittenAtOnce(t *testing.T) {
	out := &sink{}
	w := logbuffer.New(out, time.Hour)
	_, _ = w.Write([]byte("small\n"))
	if text, _ := out.snapshot(); text != "" {
		t.Fatalf("written before the delay: %q", text)
	}
	big := bytes.Repeat([]byte("x"), logbuffer.MaxBuffered)
	_, _ = w.Write(big)
	if text, _ := out.snapshot(); !strings.HasPrefix(text, "small\n") || len(text) != len("small\n")+len(big) {
		t.Fatalf("a full buffer was not written at once (%d bytes out)", len(text))
	}
}

func TestCloseFlushesAndWritesThrough(t *testing.T) {
	out := &sink{}
	w := logbuffer.New(out, time.Hour)
	_, _ = w.Write([]byte("before\n"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte("after\n"))
	if text, _ := out.snapshot(); text != "before\nafter\n" {
		t.Fatalf("got %q", text)
	}
}
