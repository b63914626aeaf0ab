package credentialttl

import (
	"strings"
	"testing"
	"time"
)

// TestCheck holds the edges: both bounds are accepted, one step past either
// is refused, and the message says what to choose.
func TestCheck(t *testing.T) {
	for _, d := range []time.Duration{Min, Default, MinCSR, Max} {
		if err := Check(d); err != nil {
			t.Errorf("Check(%v) = %v", d, err)
		}
	}
	for _, d := range []time.Duration{-time.Minute, 0, Min - time.Nanosecond, Max + time.Nanosecond, 48 * time.Hour} {
		err := Check(d)
		if err == nil {
			t.Errorf("Check(%v) accepted", d)
			continue
		}
		if !strings.Contains(err.Error(), "choose a lifetime from 1m to 24h (default 5m)") {
			t.Errorf("Check(%v) = %q, which does not say what to choose", d, err)
		}
	}
}

func TestFormat(t *testing.T) {
	for d, want := range map[time.Duration]string{
		24 * time.Hour: "24h", 10 * time.Minute: "10m", 90 * time.Second: "1m30s",
		time.Hour + time.Minute: "1h1m", 30 * time.Second: "30s", 0: "0s",
	} {
		if got := Format(d); got != want {
			t.Errorf("Format(%v) = %q, want %q", d, got, want)
		}
	}
}
