package tokentimes

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// TestCheck holds the edges of each rule, with no skew (kube-apiserver's
// rules exactly) and with some.
func TestCheck(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	var zero time.Time
	for _, c := range []struct {
		name          string
		exp, iat, nbf time.Time
		skew          time.Duration
		want          error
	}{
		{"valid", now.Add(time.Minute), now, now, 0, nil},
		{"exp now", now, zero, zero, 0, nil},
		{"1 s past exp", now.Add(-time.Second), now.Add(-time.Minute), zero, 0, ErrExpired},
		{"1 s past exp, no iat", now.Add(-time.Second), zero, zero, 0, ErrExpired},
		{"no exp", zero, now, zero, 0, ErrNoExpiry},
		{"nbf 1m ahead", now.Add(time.Hour), zero, now.Add(NotBeforeLeeway), 0, nil},
		{"nbf 1m1s ahead", now.Add(time.Hour), zero, now.Add(NotBeforeLeeway + time.Second), 0, ErrNotYetValid},
		{"iat 1m ahead", now.Add(time.Hour), now.Add(NotBeforeLeeway), zero, 0, nil},
		{"iat 1m1s ahead", now.Add(time.Hour), now.Add(NotBeforeLeeway + time.Second), zero, 0, ErrIssuedInFuture},
		{"2m past exp, skew 2m", now.Add(-2 * time.Minute), zero, zero, 2 * time.Minute, nil},
		{"2m1s past exp, skew 2m", now.Add(-2*time.Minute - time.Second), zero, zero, 2 * time.Minute, ErrExpired},
		{"nbf 3m ahead, skew 2m", now.Add(time.Hour), zero, now.Add(3 * time.Minute), 2 * time.Minute, nil},
		{"iat 3m1s ahead, skew 2m", now.Add(time.Hour), now.Add(3*time.Minute + time.Second), zero, 2 * time.Minute, ErrIssuedInFuture},
		// Beyond the cap, the cap; below zero, none.
		{"3m1s past exp, skew 1h", now.Add(-MaxClockSkew - time.Second), zero, zero, time.Hour, ErrExpired},
		{"3m past exp, skew 1h", now.Add(-MaxClockSkew), zero, zero, time.Hour, nil},
		{"exp now, skew -1m", now, zero, zero, -time.Minute, nil},
		{"nbf 1m ahead, skew -1m", now.Add(time.Hour), zero, now.Add(NotBeforeLeeway), -time.Minute, nil},
	} {
		if err := Check(now, c.exp, c.iat, c.nbf, c.skew); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
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

// TestCLINeverStricter: whatever skew a JWTAuthenticator allows, a token
// the agent takes passes the CLI's check (CLISkew).
func TestCLINeverStricter(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	var offsets []time.Duration
	for d := -6 * time.Minute; d <= 6*time.Minute; d += 15 * time.Second {
		offsets = append(offsets, d)
	}
	for _, skew := range []time.Duration{0, time.Minute, MaxClockSkew, time.Hour} {
		for _, e := range offsets {
			for _, n := range offsets {
				exp, nbf := now.Add(e), now.Add(n)
				if Check(now, exp, nbf, nbf, skew) == nil && Check(now, exp, nbf, nbf, CLISkew) != nil {
					t.Fatalf("skew %v: exp %v, nbf and iat %v taken by the agent, refused by the CLI", skew, e, n)
				}
			}
		}
	}
}
