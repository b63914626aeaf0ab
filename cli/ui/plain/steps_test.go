package plain

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestPlainIsOneLinePerEvent(t *testing.T) {
	var out bytes.Buffer
	p := &Steps{Now: time.Now, W: &out}
	p.Step("waiting: x")
	p.Done("x")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "• waiting: x") || !strings.HasPrefix(lines[1], "✓ x") || strings.Contains(out.String(), "\r") {
		t.Fatalf("%q", out.String())
	}
}
