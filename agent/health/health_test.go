package health

import (
	"net/http"
	"testing"
)

// TestHealthListenerBoundsEveryPhase: a client that opens connections and
// sends nothing, or sends slowly, or never closes, cannot hold them.
func TestHealthListenerBoundsEveryPhase(t *testing.T) {
	s := newServer(":0", http.NotFoundHandler())
	if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.WriteTimeout <= 0 || s.IdleTimeout <= 0 {
		t.Fatalf("unbounded: header %v, read %v, write %v, idle %v", s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout)
	}
}
