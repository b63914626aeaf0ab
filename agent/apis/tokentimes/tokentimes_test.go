package tokentimes

import (
	"encoding/json"
	"testing"
	"time"
)

func TestExpiryLeeway(t *testing.T) {
	exp := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	for life, want := range map[time.Duration]time.Duration{
		-time.Minute:     0,
		0:                0,
		2 * time.Minute:  time.Minute,
		6 * time.Minute:  Leeway,
		10 * time.Minute: Leeway,
	} {
		if got := ExpiryLeeway(exp, exp.Add(-life)); got != want {
			t.Errorf("lifetime %v: leeway %v, want %v", life, got, want)
		}
	}
	if got := ExpiryLeeway(exp, time.Time{}); got != Leeway {
		t.Errorf("no iat: leeway %v, want %v", got, Leeway)
	}
}

func TestNumericDate(t *testing.T) {
	for raw, want := range map[string]time.Time{
		``:             {},
		`null`:         {},
		`1700000000`:   time.Unix(1700000000, 0),
		`1700000000.5`: time.Unix(1700000000, 5e8),
		`1.7e9`:        time.Unix(1700000000, 0),
	} {
		got, err := NumericDate(json.RawMessage(raw))
		if err != nil || !got.Equal(want) {
			t.Errorf("%q: %v, %v; want %v", raw, got, err, want)
		}
	}
	for _, raw := range []string{`"1700000000"`, `true`, `{}`, `1e400`} {
		if _, err := NumericDate(json.RawMessage(raw)); err == nil {
			t.Errorf("%q: no error", raw)
		}
	}
}
