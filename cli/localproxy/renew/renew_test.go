package renew

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cli/login"
	"github.com/pinniped-kit/pinniped/cli/login/oidclogin"
)

// clock is a fake clock whose After hands each wait to the test, which
// moves the clock on by it and fires it: no test sleeps.
type clock struct {
	mu    sync.Mutex
	t     time.Time
	waits chan wait
	// stopped, once closed, makes After hand no more waits to the test:
	// a test that is over reads none, and a Renewer blocked handing one
	// over would never see its context cancelled.
	stopped  chan struct{}
	stopOnce sync.Once
}

type wait struct {
	d    time.Duration
	fire chan time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), waits: make(chan wait), stopped: make(chan struct{})}
}

// stop ends the hand-over of waits; call it before cancelling the Renewer.
func (c *clock) stop() { c.stopOnce.Do(func() { close(c.stopped) }) }

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func (c *clock) after(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	select {
	case c.waits <- wait{d: d, fire: ch}:
	case <-c.stopped: // never fires: the Renewer returns on its context
	}
	return ch
}

// next is the Renewer's next wait; it fails the test if none comes.
func (c *clock) next(t *testing.T) wait {
	t.Helper()
	select {
	case w := <-c.waits:
		return w
	case <-time.After(10 * time.Second):
		t.Fatal("the renewer did not wait")
		return wait{}
	}
}

// elapse moves the clock on by w and fires it.
func (c *clock) elapse(w wait) {
	c.add(w.d)
	w.fire <- c.now()
}

// issuer hands out credentials as the login runner would, from a script
// of answers; asks records what each call asked for.
type issuer struct {
	clk  *clock
	mu   sync.Mutex
	asks []Ask
	// answer decides each call's result; nil: a fresh credential living
	// ttl.
	answer func(a Ask, n int) (*credcache.Credential, error)
	ttl    time.Duration
	n      int
}

func (s *issuer) get(_ context.Context, a Ask) (*credcache.Credential, error) {
	s.mu.Lock()
	s.asks = append(s.asks, a)
	s.n++
	n := s.n
	s.mu.Unlock()
	if s.answer != nil {
		return s.answer(a, n)
	}
	return s.fresh(n), nil
}

func (s *issuer) fresh(n int) *credcache.Credential {
	return &credcache.Credential{Token: fmt.Sprintf("token-%d", n), ExpirationTimestamp: s.clk.now().Add(s.ttl)}
}

func (s *issuer) asked() []Ask {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Ask(nil), s.asks...)
}

// applied records what Apply was given.
type applied struct {
	mu    sync.Mutex
	creds []*credcache.Credential
	err   error
}

func (a *applied) apply(c *credcache.Credential) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return a.err
	}
	a.creds = append(a.creds, c)
	return nil
}

func (a *applied) tokens() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, c := range a.creds {
		out = append(out, c.Token)
	}
	return out
}

func (a *applied) fail(err error) { a.mu.Lock(); a.err = err; a.mu.Unlock() }

type bed struct {
	// changes has every Info Changed was told of.
	changes chan Info
	clk     *clock
	iss     *issuer
	app     *applied
	r       *Renewer
	stop    func()
	done    chan struct{}
}

func start(t *testing.T, ttl time.Duration, configure func(*bed)) *bed {
	t.Helper()
	clk := newClock()
	b := &bed{clk: clk, iss: &issuer{clk: clk, ttl: ttl}, app: &applied{}, done: make(chan struct{}), changes: make(chan Info, 1000)}
	// One wait per renewal, so tests see the renewal's timing; the
	// wall-clock checks have a test of their own.
	b.r = &Renewer{Get: b.iss.get, Apply: b.app.apply, Now: clk.now, After: clk.after, Turn: make(chan struct{}, 1),
		WakeCheck: 1 << 62, Changed: func(i Info) { b.changes <- i }}
	if configure != nil {
		configure(b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.stop = cancel
	go func() { defer close(b.done); b.r.Run(ctx) }()
	t.Cleanup(func() {
		clk.stop()
		cancel()
		select {
		case <-b.done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context was cancelled")
		}
	})
	return b
}

// reach waits until Changed reports state.
func (b *bed) reach(t *testing.T, state State) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case i := <-b.changes:
			if i.State == state {
				return
			}
		case <-timeout:
			t.Fatalf("never %v", state)
		}
	}
}

func wantState(t *testing.T, r *Renewer, want State, msgHas string) {
	t.Helper()
	got, msg := r.State()
	if got != want || !strings.Contains(msg, msgHas) {
		t.Fatalf("state %v %q, want %v with %q", got, msg, want, msgHas)
	}
}

// TestRenewsAtAThirdOfTheLifeLeft: a 5-minute credential is renewed with
// 100 s left (a third), asking for one valid longer than that, so the
// engine's cache does not hand back the same credential.
func TestRenewsAtAThirdOfTheLifeLeft(t *testing.T) {
	b := start(t, 5*time.Minute, nil)
	for i := range 3 {
		w := b.clk.next(t)
		if w.d != 200*time.Second {
			t.Fatalf("renewal %d after %v, want 200s (5m - 5m/3)", i, w.d)
		}
		wantState(t, b.r, Ready, "")
		if info := b.r.Info(); info.Renewals != i+1 || !info.Next.Equal(b.clk.now().Add(200*time.Second)) || !info.Expires.Equal(b.clk.now().Add(5*time.Minute)) {
			t.Fatalf("info %+v", info)
		}
		b.clk.elapse(w)
	}
	b.clk.next(t)
	asks := b.iss.asked()
	if len(asks) != 4 || asks[0].MinValid != MinMargin || asks[1].MinValid != 100*time.Second || asks[3].Person {
		t.Fatalf("asks %+v: the first wants MinMargin, the renewals the margin, none a person", asks)
	}
	if got := b.app.tokens(); strings.Join(got, ",") != "token-1,token-2,token-3,token-4" {
		t.Fatalf("applied %v", got)
	}
}

// TestRenewsAtOnceAfterSleep: a wait looks at the wall clock every
// WakeCheck, so when the machine wakes from a sleep longer than the
// credential's life (timers stood still meanwhile), the renewal runs at
// the next check, not after the rest of a wait begun before the sleep.
func TestRenewsAtOnceAfterSleep(t *testing.T) {
	b := start(t, 5*time.Minute, func(b *bed) { b.r.WakeCheck = WakeCheck })
	w := b.clk.next(t)
	if w.d != WakeCheck {
		t.Fatalf("the first wait is %v, want WakeCheck (%v)", w.d, WakeCheck)
	}
	b.clk.elapse(w)
	w = b.clk.next(t)
	if w.d != WakeCheck || len(b.iss.asked()) != 1 {
		t.Fatalf("after one check: wait %v and %d Gets, want another check and no renewal yet", w.d, len(b.iss.asked()))
	}
	b.clk.add(8 * time.Hour) // the lid closed
	b.clk.elapse(w)
	b.clk.next(t)
	if n := len(b.iss.asked()); n != 2 {
		t.Fatalf("%d Gets after waking, want the renewal at once (2)", n)
	}
	wantState(t, b.r, Ready, "")
	if info := b.r.Info(); !info.Expires.Equal(b.clk.now().Add(5 * time.Minute)) {
		t.Fatalf("after waking the credential expires at %v, want a fresh one", info.Expires)
	}
}

// TestShortLivedCredentialsKeepTheMinimumMargin: a 1-minute credential is
// renewed with 45 s left, not 20 s; one shorter than the margin is renewed
// after RetryMin, never in a spin.
func TestShortLivedCredentialsKeepTheMinimumMargin(t *testing.T) {
	for _, c := range []struct {
		ttl, want time.Duration
	}{{time.Minute, 15 * time.Second}, {30 * time.Second, RetryMin}, {time.Hour, 40 * time.Minute}} {
		t.Run(c.ttl.String(), func(t *testing.T) {
			b := start(t, c.ttl, nil)
			if w := b.clk.next(t); w.d != c.want {
				t.Fatalf("a %v credential renewed after %v, want %v", c.ttl, w.d, c.want)
			}
		})
	}
}

// TestBackoff: failures are retried after 5 s, doubling to 60 s; while the
// applied credential lasts the target stays Ready (saying why its renewal
// is late), then it is Failed; a success resets the backoff.
func TestBackoff(t *testing.T) {
	var fail sync.Mutex
	failing := false
	b := start(t, 5*time.Minute, func(b *bed) {
		b.iss.answer = func(_ Ask, n int) (*credcache.Credential, error) {
			fail.Lock()
			defer fail.Unlock()
			if failing {
				return nil, errors.New("the agent refused the exchange")
			}
			return b.iss.fresh(n), nil
		}
	})
	w := b.clk.next(t)
	fail.Lock()
	failing = true
	fail.Unlock()
	b.clk.elapse(w) // 100 s left
	var got []time.Duration
	for range 7 {
		w := b.clk.next(t)
		got = append(got, w.d)
		b.clk.elapse(w)
	}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 60 * time.Second, 60 * time.Second, 60 * time.Second}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("backoff %v, want %v", got, want)
	}
	// 100 s of credential, 255 s of retries: it has expired.
	w = b.clk.next(t)
	wantState(t, b.r, Failed, "could not get a credential: the agent refused the exchange (next try in 1m0s)")
	fail.Lock()
	failing = false
	fail.Unlock()
	b.clk.elapse(w)
	if w := b.clk.next(t); w.d != 200*time.Second {
		t.Fatalf("after a success the next renewal is after %v, want 200s", w.d)
	}
	wantState(t, b.r, Ready, "")
}

// TestReadyWhileTheRenewalFails: the current credential serves until it
// expires, and the message says the renewal's trouble.
func TestReadyWhileTheRenewalFails(t *testing.T) {
	b := start(t, 5*time.Minute, nil)
	w := b.clk.next(t)
	b.iss.mu.Lock()
	b.iss.answer = func(Ask, int) (*credcache.Credential, error) { return nil, errors.New("the agent is down") }
	b.iss.mu.Unlock()
	b.clk.elapse(w)
	w = b.clk.next(t)
	wantState(t, b.r, Ready, "could not get a credential: the agent is down")
	b.clk.add(99 * time.Second)
	wantState(t, b.r, Ready, "the agent is down")
	b.clk.add(time.Second)
	wantState(t, b.r, Failed, "the agent is down")
	_ = w
}

// TestStates: Renewing while the first Get runs, Ready once applied,
// Failed when the first attempt fails.
// The retry after a failure still says why the target cannot serve: a
// client asking meanwhile learns the reason, not only that a try is on;
// after a success, the next renewal speaks of no old failure.
func TestStates(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan int)
	b := start(t, 5*time.Minute, func(b *bed) {
		b.iss.answer = func(_ Ask, n int) (*credcache.Credential, error) {
			if n <= 3 {
				select {
				case entered <- n:
				case <-b.clk.stopped:
					return nil, errors.New("test over")
				}
				select {
				case <-release:
				case <-b.clk.stopped:
					return nil, errors.New("test over")
				}
			}
			if n == 1 {
				return nil, errors.New("no route to the agent")
			}
			return b.iss.fresh(n), nil
		}
	})
	<-entered
	wantState(t, b.r, Renewing, "getting a new credential")
	if _, msg := b.r.State(); strings.Contains(msg, "last try") {
		t.Fatalf("the first attempt speaks of a last try: %q", msg)
	}
	release <- struct{}{}
	w := b.clk.next(t)
	wantState(t, b.r, Failed, "no route to the agent")
	b.clk.elapse(w)
	<-entered
	wantState(t, b.r, Renewing, "getting a new credential; the last try failed: could not get a credential: no route to the agent")
	release <- struct{}{}
	w = b.clk.next(t)
	if got, msg := b.r.State(); got != Ready || msg != "" {
		t.Fatalf("after the retry succeeded: %v %q, want ready with no message", got, msg)
	}
	// The renewal of a credential still valid: Ready, with the renewal's
	// own message, which must not bring the old failure back.
	b.clk.elapse(w)
	<-entered
	if got, msg := b.r.State(); got != Ready || msg != "getting a new credential" {
		t.Fatalf("renewing after a success: %v %q, want ready with %q", got, msg, "getting a new credential")
	}
	release <- struct{}{}
	b.clk.next(t)
}

// TestApplyError: a credential that cannot be used is a failure like any
// other: backoff, Failed, and the next success is applied.
func TestApplyError(t *testing.T) {
	b := start(t, 5*time.Minute, func(b *bed) { b.app.fail(errors.New("the certificate does not parse")) })
	w := b.clk.next(t)
	if w.d != RetryMin {
		t.Fatalf("after an Apply error, waited %v, want %v", w.d, RetryMin)
	}
	wantState(t, b.r, Failed, "could not use the new credential: the certificate does not parse")
	if info := b.r.Info(); info.Renewals != 0 || !info.Expires.IsZero() {
		t.Fatalf("a credential that was not applied is counted: %+v", info)
	}
	b.app.fail(nil)
	b.clk.elapse(w)
	b.clk.next(t)
	wantState(t, b.r, Ready, "")
	if got := b.app.tokens(); len(got) != 1 || got[0] != "token-2" {
		t.Fatalf("applied %v", got)
	}
}

// TestCancelStops: Run returns when its context ends, whether it waits
// for a renewal, for a Get, or for its turn to ask the person.
func TestCancelStops(t *testing.T) {
	t.Run("waiting", func(t *testing.T) {
		b := start(t, 5*time.Minute, nil)
		b.clk.next(t)
		b.stop()
		<-b.done
	})
	t.Run("in Get", func(t *testing.T) {
		entered := make(chan struct{})
		b := start(t, 5*time.Minute, func(b *bed) {
			b.r.Get = func(ctx context.Context, _ Ask) (*credcache.Credential, error) {
				close(entered)
				<-ctx.Done()
				return nil, ctx.Err()
			}
		})
		<-entered
		b.stop()
		select {
		case w := <-b.clk.waits:
			t.Fatalf("waited %v after the context ended", w.d)
		case <-b.done:
		}
	})
	t.Run("waiting for the person", func(t *testing.T) {
		turn := make(chan struct{}, 1)
		turn <- struct{}{} // another target's login holds the turn
		b := start(t, 5*time.Minute, func(b *bed) {
			b.r.Interactive, b.r.Turn = true, turn
			b.iss.answer = func(Ask, int) (*credcache.Credential, error) { return nil, login.ErrNeedsPerson }
		})
		b.reach(t, NeedsPerson)
		b.stop()
		<-b.done
	})
}

// TestNeedsPerson: when only a person can help, the state says so at once
// (the server answers 503 instead of waiting). Without a terminal it
// retries with backoff, never asking; with one it asks, in its turn.
func TestNeedsPerson(t *testing.T) {
	t.Run("no terminal", func(t *testing.T) {
		b := start(t, 5*time.Minute, func(b *bed) {
			b.iss.answer = func(a Ask, _ int) (*credcache.Credential, error) {
				return nil, fmt.Errorf("%w: the browser login", login.ErrNeedsPerson)
			}
		})
		for _, want := range []time.Duration{5 * time.Second, 10 * time.Second} {
			w := b.clk.next(t)
			if w.d != want {
				t.Fatalf("waited %v, want %v", w.d, want)
			}
			wantState(t, b.r, NeedsPerson, "log in once with the original kubeconfig")
			b.clk.elapse(w)
		}
		for _, a := range b.iss.asked() {
			if a.Person {
				t.Fatal("a renewer without a terminal asked for a person")
			}
		}
	})

	t.Run("its retry does not call it a failure", func(t *testing.T) {
		entered := make(chan int)
		b := start(t, 5*time.Minute, func(b *bed) {
			b.iss.answer = func(_ Ask, n int) (*credcache.Credential, error) {
				if n == 2 {
					select {
					case entered <- n:
					case <-b.clk.stopped:
					}
					<-b.clk.stopped
				}
				return nil, fmt.Errorf("%w: the browser login", login.ErrNeedsPerson)
			}
		})
		b.clk.elapse(b.clk.next(t))
		<-entered
		if got, msg := b.r.State(); got != Renewing || strings.Contains(msg, "last try") {
			t.Fatalf("retrying after a login was needed: %v %q, want renewing with no failure named", got, msg)
		}
	})

	t.Run("one person, one login at a time", func(t *testing.T) {
		turn := make(chan struct{}, 1)
		asking := make(chan struct{}, 2) // a login waits for the person
		loggedIn := make(chan struct{})  // the person finished it
		var mu sync.Mutex
		haveSession, persons := false, 0
		// Two targets sharing one issuer: whoever gets the turn first asks
		// the person; the other then finds the session without asking.
		get := func(clk *clock) func(context.Context, Ask) (*credcache.Credential, error) {
			return func(_ context.Context, a Ask) (*credcache.Credential, error) {
				mu.Lock()
				have := haveSession
				if !have && a.Person {
					persons++
				}
				mu.Unlock()
				switch {
				case have:
				case !a.Person:
					return nil, login.ErrNeedsPerson
				default:
					asking <- struct{}{}
					<-loggedIn
					mu.Lock()
					haveSession = true
					mu.Unlock()
				}
				return &credcache.Credential{Token: "t", ExpirationTimestamp: clk.now().Add(5 * time.Minute)}, nil
			}
		}
		var bs []*bed
		for range 2 {
			bs = append(bs, start(t, 5*time.Minute, func(b *bed) {
				b.r.Interactive, b.r.Turn, b.r.Get = true, turn, get(b.clk)
			}))
		}
		for _, b := range bs {
			b.reach(t, NeedsPerson)
			wantState(t, b.r, NeedsPerson, "see the terminal running pinniped proxy")
		}
		<-asking
		close(loggedIn)
		for _, b := range bs {
			b.clk.next(t)
			wantState(t, b.r, Ready, "")
		}
		mu.Lock()
		defer mu.Unlock()
		if persons != 1 {
			t.Fatalf("the person was asked %d times", persons)
		}
	})
}

// TestRefusedPasswordIsNotRetried: a password the identity provider refused
// is never tried again (many lock the account after a few), and the target
// says why and what to do.
func TestRefusedPasswordIsNotRetried(t *testing.T) {
	b := start(t, 5*time.Minute, func(b *bed) {
		b.iss.answer = func(Ask, int) (*credcache.Credential, error) {
			return nil, fmt.Errorf("password login: %w: oauth2: \"invalid_grant\"", oidclogin.ErrPasswordRefused)
		}
	})
	b.reach(t, Failed)
	select {
	case w := <-b.clk.waits:
		t.Fatalf("after a refused password the renewer waits %v to try again", w.d)
	case <-time.After(100 * time.Millisecond):
	}
	if n := len(b.iss.asked()); n != 1 {
		t.Fatalf("%d attempts, want 1", n)
	}
	wantState(t, b.r, Failed, "PINNIPED_PASSWORD")
}

// TestNoExpiryIsNeverRenewed: a static token without the agent has no
// expiry; it is applied once and Run waits for its context.
func TestNoExpiryIsNeverRenewed(t *testing.T) {
	b := start(t, 0, func(b *bed) {
		b.iss.answer = func(Ask, int) (*credcache.Credential, error) { return &credcache.Credential{Token: "static"}, nil }
	})
	b.reach(t, Ready)
	select {
	case w := <-b.clk.waits:
		t.Fatalf("a credential without expiry is renewed after %v", w.d)
	case <-time.After(50 * time.Millisecond):
	}
}
