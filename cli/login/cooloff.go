package login

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pinniped-kit/pinniped/cache/lock"
	"github.com/pinniped-kit/pinniped/cache/privatedir"
)

// DefaultCoolOff is how long after a login that needs a person was started
// for a caller that is not a person at a terminal (an IDE, a GUI, a script)
// no new one is started for the same session: such callers run kubectl
// every few seconds, each with its own timeout, and each would otherwise
// open another browser tab while nobody is there. PINNIPED_LOGIN_COOLOFF
// sets another (a Go duration; 0 turns it off).
const DefaultCoolOff = 5 * time.Minute

// ErrLoginWaiting: a login that needs a person was started for this
// session lately, by a caller nobody watches, and has not finished; a
// caller like it does not start another.
var ErrLoginWaiting = errors.New("a login is waiting for you")

// pending records that a login needing a person started: a file in the lock
// directory, per session, holding when. It outlives the process that wrote
// it (an IDE kills kubectl, and its plugin with it, after a few seconds),
// and a finished login removes it.
type pending struct {
	Started time.Time `json:"started"`
}

func (r *Runner) coolOff() time.Duration {
	if r.CoolOff != 0 {
		return max(r.CoolOff, 0)
	}
	return DefaultCoolOff
}

func pendingName(sessionKey string) string {
	sum := sha256.Sum256([]byte(sessionKey))
	return hex.EncodeToString(sum[:12]) + ".waiting"
}

// waitingSince is when a login needing a person was started for the
// session lately (within the cool-off), if one was and has not finished;
// zero otherwise.
func (r *Runner) waitingSince(sessionKey string) time.Time {
	started := r.markedSince(sessionKey)
	if started.IsZero() {
		return started
	}
	if age := r.Now().Sub(started); age < 0 || age >= r.coolOff() {
		return time.Time{}
	}
	return started
}

// markedSince is when the login recorded for the session started, however
// long ago (it may still run: a login's --timeout outlasts the cool-off);
// zero when none is recorded.
func (r *Runner) markedSince(sessionKey string) time.Time {
	if r.LockDir == "" || r.coolOff() == 0 || sessionKey == "" {
		return time.Time{}
	}
	raw, err := privatedir.ReadFile(r.LockDir, pendingName(sessionKey))
	if err != nil {
		return time.Time{}
	}
	var p pending
	if json.Unmarshal(raw, &p) != nil {
		return time.Time{}
	}
	return p.Started
}

// slice is how long a caller nobody watches waits for a lock at a time
// before it looks again whether the holder waits for a person.
const slice = 500 * time.Millisecond

// lockOrCoolOff takes the lock called name (a credential's or a session's)
// as lock does, but does not wait out a login that waits for a person:
// while the lock is held by a login recorded for sessionKey, a caller
// nobody watches fails at once (ErrLoginWaiting), and a person is told
// why they wait. It looks again between short waits, so a login recorded
// only after this caller began waiting is found too.
func (r *Runner) lockOrCoolOff(ctx context.Context, name, sessionKey string, req Request) (func(), error) {
	if r.coolOff() == 0 || sessionKey == "" || r.Store == nil || r.LockDir == "" {
		return r.lock(ctx, name, req.Interactive)
	}
	timeout := r.lockTimeout(req.Interactive)
	deadline := r.Now().Add(timeout)
	told := false
	for {
		unlock, err := r.lockName(ctx, name, min(slice, timeout))
		if !errors.Is(err, lock.ErrBusy) {
			return unlock, err
		}
		if since := r.markedSince(sessionKey); !since.IsZero() {
			if !r.watched(req) {
				return nil, r.coolingOff(since, true)
			}
			if !told {
				told = true
				r.UI.Warn(fmt.Sprintf("another login of this session, started %s ago, is waiting in the browser (or for a device code)",
					r.Now().Sub(since).Round(time.Second)), "finish it there; this one goes on when it ends")
			}
		}
		if ctx.Err() != nil || !r.Now().Before(deadline) {
			return nil, err
		}
	}
}

// markWaiting records that a login needing a person starts now; clear
// removes the record once a login of the session finished.
func (r *Runner) markWaiting(sessionKey string) {
	if r.LockDir == "" || r.coolOff() == 0 {
		return
	}
	if b, err := json.Marshal(pending{Started: r.Now()}); err == nil {
		if err := privatedir.WriteFile(r.LockDir, pendingName(sessionKey), b); err != nil {
			r.debug("could not record the login in progress: %v", err)
		}
	}
}

func (r *Runner) clearWaiting(sessionKey string) {
	if r.LockDir != "" {
		_ = privatedir.Remove(r.LockDir, pendingName(sessionKey))
	}
}

// coolingOff is the error of a caller nobody watches that finds a login
// of its session started lately: one line, fast, naming what to do.
// running says whether that login still runs (its lock is held).
func (r *Runner) coolingOff(since time.Time, running bool) error {
	age := r.Now().Sub(since).Round(time.Second)
	login := "`pinniped login` in a terminal"
	if r.LoginHint != "" {
		login = "`" + r.LoginHint + "` in a terminal"
	}
	if running {
		return fmt.Errorf("%w: a login started %s ago is waiting in the browser (or for a device code); finish it there, or run %s",
			ErrLoginWaiting, age, login)
	}
	again := since.Add(r.coolOff()).Sub(r.Now()).Round(time.Second)
	return fmt.Errorf("%w: a login was started in the browser %s ago and not finished; log in now with %s (no new browser opens for another %s)",
		ErrLoginWaiting, age, login, again)
}

// startPersonLogin is called as a login that needs a person starts: for
// a caller nobody watches, it refuses while another such login of the
// session is recent. Every such login is recorded, so that callers nobody
// watches do not wait on it either.
func (r *Runner) startPersonLogin(sessionKey string, req Request) error {
	if !r.watched(req) {
		if since := r.waitingSince(sessionKey); !since.IsZero() {
			return r.coolingOff(since, false)
		}
	}
	r.markWaiting(sessionKey)
	return nil
}

// watched: a person is there (at a terminal, or ran the login
// themselves), who is never held back by the cool-off.
func (r *Runner) watched(req Request) bool { return r.CanPrompt || req.Attended }
