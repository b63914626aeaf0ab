package terminal

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestTerminalSpinsThenSettles(t *testing.T) {
	var out syncBuf
	term := &Steps{W: &out, Interval: 10 * time.Millisecond}
	term.Step("waiting: agent Deployment available")
	time.Sleep(60 * time.Millisecond)
	term.Done("agent Deployment available")
	s := out.String()
	if strings.Count(s, "\r\033[K") < 3 {
		t.Fatalf("the step line was not redrawn in place: %q", s)
	}
	if !strings.Contains(s, "⠙ waiting: agent Deployment available") {
		t.Fatalf("no spinner frame: %q", s)
	}
	if !strings.HasSuffix(s, "✓ agent Deployment available (0.1s)\n") && !strings.HasSuffix(s, "✓ agent Deployment available (0.0s)\n") {
		t.Fatalf("the finished step does not stay as a line: %q", s)
	}
	before := out.String()
	time.Sleep(40 * time.Millisecond)
	if out.String() != before {
		t.Fatal("the spinner kept drawing after Done")
	}
}
