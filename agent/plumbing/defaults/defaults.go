// Package defaults fills in the optional seams of the agent's components:
// each takes a logger and a clock that tests set and production leaves nil.
package defaults

import (
	"log/slog"
	"time"
)

// Log is l, or slog.Default() when l is nil.
func Log(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.Default()
}

// Now is now(), or time.Now() when now is nil.
func Now(now func() time.Time) time.Time {
	if now != nil {
		return now()
	}
	return time.Now()
}
