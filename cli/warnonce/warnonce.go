// Package warnonce remembers, across processes, which warnings were shown
// lately, so a warning that matters (the OS keyring unavailable, a
// credential that could not be cached) is said once per cause per day
// instead of at every kubectl call: kubectl shows a plugin's stderr each
// time it runs it, and IDEs and full-screen clients run it every few
// minutes. The record is a small file in the login's lock directory,
// holding hashes of causes and when each was last shown: never a
// warning's text.
package warnonce

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/pinniped-kit/pinniped/cache/lock"
	"github.com/pinniped-kit/pinniped/cache/privatedir"
)

// Period is how long a cause stays quiet once shown.
const Period = 24 * time.Hour

// file is the record's name in the lock directory.
const file = "warned.json"

// Store decides whether a warning is shown.
type Store struct {
	// Dir holds the record; "" keeps nothing across processes (every
	// warning is shown, once per process).
	Dir string
	// Now is the clock (nil: time.Now).
	Now func() time.Time

	mu   sync.Mutex
	seen map[string]bool // this process's, so one run never repeats itself
}

// variable are the parts of a warning that change from one occurrence of
// the same cause to the next: what is in parentheses (an error's details,
// a time) and numbers.
var variable = regexp.MustCompile(`\([^()]*\)|[0-9]+`)

// Cause is what identifies a warning's cause: its text without the parts
// that vary between occurrences.
func Cause(text string) string {
	return strings.Join(strings.Fields(variable.ReplaceAllString(text, "")), " ")
}

// First reports whether a warning of this cause is to be shown now, and
// if so records that it was. It is not shown again for Period. A record
// that cannot be read or written never hides a warning; one that another
// process is writing at this moment does, whatever its cause: that
// process is showing a warning now, most likely this one, and the next
// call shows this one if it was another.
func (s *Store) First(text string) bool {
	sum := sha256.Sum256([]byte(Cause(text)))
	key := hex.EncodeToString(sum[:8])
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[key] {
		return false
	}
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	s.seen[key] = true
	if s.Dir == "" {
		return true
	}
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	// Another process writing the record right now is showing a warning
	// at this moment, most likely this one: under a storm of calls a wait
	// here would only let every one of them through.
	release, _, err := lock.Hold(context.Background(), s.Dir, file, 200*time.Millisecond)
	if errors.Is(err, lock.ErrBusy) {
		return false
	}
	if err != nil {
		return true
	}
	defer release()
	shown := map[string]int64{}
	if raw, err := privatedir.ReadFile(s.Dir, file); err == nil {
		_ = json.Unmarshal(raw, &shown) // a corrupt record is replaced
	}
	if at, ok := shown[key]; ok && now.Sub(time.Unix(at, 0)) < Period && !now.Before(time.Unix(at, 0)) {
		return false
	}
	shown[key] = now.Unix()
	for k, at := range shown {
		if now.Sub(time.Unix(at, 0)) >= Period {
			delete(shown, k)
		}
	}
	if b, err := json.Marshal(shown); err == nil {
		_ = privatedir.WriteFile(s.Dir, file, b)
	}
	return true
}

// Writer passes on to w each line written to it whose cause was not shown
// lately, for warnings that arrive as writes (the credential store's).
func (s *Store) Writer(w io.Writer) io.Writer { return &writer{s: s, w: w} }

type writer struct {
	s *Store
	w io.Writer
}

func (w *writer) Write(p []byte) (int, error) {
	if w.s.First(string(p)) {
		if _, err := w.w.Write(p); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}
