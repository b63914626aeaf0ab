// Package renew keeps one pinniped proxy target supplied with a cluster
// credential: it gets one, applies it (a new upstream generation), and gets
// the next one well before the current one expires, so the clients behind
// the proxy never see an expired credential. It reports, without any
// identity or secret, whether the target can serve, and why not.
package renew

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cli/login"
	"github.com/pinniped-kit/pinniped/cli/login/oidclogin"
	"github.com/pinniped-kit/pinniped/cli/ui/termsafe"
)

// Timing of renewals and retries.
const (
	// MinMargin is the least validity left at which a credential is
	// renewed: room for the retries of RetryMin..RetryMax before it
	// expires.
	MinMargin = 45 * time.Second
	// RetryMin is the first wait after a failure, doubling to RetryMax.
	// It is also the least wait between two renewals, so a credential
	// shorter-lived than MinMargin cannot make the loop spin.
	RetryMin = 5 * time.Second
	RetryMax = 60 * time.Second
	// WakeCheck is how often a wait looks at the wall clock. Timers run on
	// the monotonic clock, which stands still while a laptop sleeps: a
	// 3-minute wait begun before a night's sleep would end 3 minutes after
	// waking, the credential long expired meanwhile.
	WakeCheck = 15 * time.Second
)

// Margin is how long before its expiry a credential that lived lifetime
// when obtained is renewed: a third of its life, and at least MinMargin.
func Margin(lifetime time.Duration) time.Duration {
	return max(MinMargin, lifetime/3)
}

// State is whether a target can serve.
type State int

const (
	// Renewing: no usable credential yet, and a renewal that needs nobody
	// is under way (the server tells clients to retry shortly).
	Renewing State = iota
	// Ready: a credential is applied and has not expired.
	Ready
	// NeedsPerson: only a login with a person can give a credential (the
	// server answers at once instead of waiting).
	NeedsPerson
	// Failed: the last attempt failed; another follows after a backoff.
	Failed
)

func (s State) String() string {
	switch s {
	case Renewing:
		return "renewing"
	case Ready:
		return "ready"
	case NeedsPerson:
		return "needs login"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Ask is what a renewal asks Get for.
type Ask struct {
	// MinValid: a credential with no more than this left will not do (the
	// login request's MinValid). At a renewal it is the current credential's
	// margin, so the cached one, which is the current one, is not handed back.
	MinValid time.Duration
	// Person: a person may be asked (a browser, a device code, a
	// password). Without it Get must not start such a login, and returns
	// an error wrapping login.ErrNeedsPerson instead (Request.Unattended).
	Person bool
}

// Info is what status and the state file show of a target: never an
// identity, never a secret.
type Info struct {
	State State
	// Message says why the target is not Ready, or what a Ready target's
	// renewal is going through; "" when there is nothing to say.
	Message string
	// Expires is the applied credential's expiry (zero: none applied, or
	// one that never expires); Next the next attempt (zero: none planned).
	Expires, Next time.Time
	// Renewals counts the credentials applied.
	Renewals int
}

// Renewer renews one target's credential. Run it once, in its own
// goroutine; State and Info may be called from any goroutine.
type Renewer struct {
	// Get returns a credential valid for more than a.MinValid: the login
	// runner asked with MinValid = a.MinValid and Unattended = !a.Person.
	Get func(ctx context.Context, a Ask) (*credcache.Credential, error)
	// Apply starts using a credential (a new upstream generation).
	Apply func(*credcache.Credential) error
	// Now and After are the clock, required (time.Now and time.After but
	// in tests).
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
	// WakeCheck overrides the package's WakeCheck (0: that one).
	WakeCheck time.Duration
	// Interactive: a person can be asked for a login (pinniped proxy runs
	// in a terminal). Without it a login that needs a person is reported
	// and retried with backoff: a `pinniped login` run elsewhere fills the
	// shared cache, and the next attempt finds it.
	Interactive bool
	// Turn serialises the logins that need a person across every Renewer
	// of the process (one terminal, one person): a channel of capacity 1,
	// held by sending. Nil: the process's own.
	Turn chan struct{}
	// Changed, when set, is called (from Run's goroutine) after each
	// change of Info, e.g. to print a line or write the state file.
	Changed func(Info)

	mu      sync.Mutex
	phase   State
	message string
	// lastProblem is the last failed attempt's reason, "" after a success:
	// a retry under way still says why the target cannot serve.
	lastProblem string
	applied     bool
	expires     time.Time
	next        time.Time
	renewals    int
}

// personTurn is the process's one turn for logins that need a person.
var personTurn = make(chan struct{}, 1)

func (r *Renewer) turn() chan struct{} {
	if r.Turn != nil {
		return r.Turn
	}
	return personTurn
}

// State is whether the target can serve now, and why not (or what its
// renewal is going through): Ready while an applied credential has not
// expired, whatever its renewal's trouble; otherwise the renewal's state.
func (r *Renewer) State() (State, string) {
	i := r.Info()
	return i.State, i.Message
}

// Info is State with the expiry, the next attempt and the renewal count.
func (r *Renewer) Info() Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.infoLocked()
}

func (r *Renewer) infoLocked() Info {
	i := Info{State: r.phase, Message: r.message, Expires: r.expires, Next: r.next, Renewals: r.renewals}
	valid := r.applied && (r.expires.IsZero() || r.Now().Before(r.expires))
	switch {
	case valid && r.phase != Ready:
		// The current credential still serves while its successor is
		// being got; the message tells why that takes long.
		i.State = Ready
	case !valid && r.phase == Ready:
		// Its renewal was due while the machine slept: the next wall-clock
		// check starts it.
		i.State, i.Message = Renewing, "the credential expired; getting a new one"
	}
	return i
}

// set records a phase and tells Changed.
func (r *Renewer) set(update func()) {
	r.mu.Lock()
	update()
	i := r.infoLocked()
	r.mu.Unlock()
	if r.Changed != nil {
		r.Changed(i)
	}
}

// Run renews until ctx is done: the first credential at once, then each
// at exp - Margin(lifetime), the lifetime being its expiry minus the time
// Get returned it. A failure is retried after RetryMin, doubling to
// RetryMax. A credential without expiry is applied and never renewed.
func (r *Renewer) Run(ctx context.Context) {
	minValid := MinMargin
	failures := 0
	for {
		cred, err := r.attempt(ctx, minValid)
		if ctx.Err() != nil {
			return
		}
		var wait time.Duration
		switch {
		case errors.Is(err, oidclogin.ErrPasswordRefused):
			// Trying a refused password again and again would lock the
			// account at many identity providers (LDAP, AD).
			r.set(func() {
				r.phase, r.next = Failed, time.Time{}
				r.message = "the identity provider refused the username or password (" + termsafe.Visible(err.Error()) +
					"); pinniped proxy does not try it again, so the account is not locked: set the right PINNIPED_USERNAME and PINNIPED_PASSWORD and restart pinniped proxy"
			})
			<-ctx.Done()
			return
		case err != nil:
			wait = min(RetryMin<<min(failures, 8), RetryMax)
			failures++
			state, msg := Failed, "could not get a credential: "+termsafe.Visible(err.Error())
			if errors.Is(err, login.ErrNeedsPerson) {
				state, msg = NeedsPerson, r.needsPersonMessage()
			}
			next := r.Now().Add(wait)
			r.set(func() {
				r.phase, r.message, r.next = state, fmt.Sprintf("%s (next try in %s)", msg, wait), next
				// A login that needs a person is not a failure, and its
				// message is shown with NeedsPerson's own details.
				r.lastProblem = ""
				if state == Failed {
					r.lastProblem = msg
				}
			})
		case cred.ExpirationTimestamp.IsZero():
			r.set(func() { r.next = time.Time{} })
			<-ctx.Done()
			return
		default:
			failures = 0
			obtained := r.Now()
			margin := Margin(cred.ExpirationTimestamp.Sub(obtained))
			// At the renewal the current credential has margin left, and
			// a cached one with that little left must not come back.
			minValid = margin
			wait = max(cred.ExpirationTimestamp.Add(-margin).Sub(obtained), RetryMin)
			next := obtained.Add(wait)
			r.set(func() { r.next = next })
		}
		if !r.sleep(ctx, wait) {
			return
		}
	}
}

// sleep waits d by the wall clock, looking at it every WakeCheck, so a
// renewal due while the machine slept runs as soon as it wakes. False: ctx
// ended first.
func (r *Renewer) sleep(ctx context.Context, d time.Duration) bool {
	check := r.WakeCheck
	if check <= 0 {
		check = WakeCheck
	}
	// Round(0) drops the monotonic reading: comparisons then use the wall
	// clock, which goes on while the machine sleeps.
	until := r.Now().Add(d).Round(0)
	for {
		left := until.Sub(r.Now().Round(0))
		if left <= 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-r.After(min(left, check)):
		}
	}
}

func (r *Renewer) needsPersonMessage() string {
	if r.Interactive {
		return "a login is needed: see the terminal running pinniped proxy"
	}
	return "a login is needed and pinniped proxy has no terminal to ask on: log in once with the original kubeconfig (any kubectl command), and the proxy uses that session"
}

// attempt gets and applies one credential, asking a person only when
// nothing else can give one, and only in its turn.
func (r *Renewer) attempt(ctx context.Context, minValid time.Duration) (*credcache.Credential, error) {
	r.set(func() {
		r.phase, r.message = Renewing, "getting a new credential"
		if r.lastProblem != "" {
			r.message += "; the last try failed: " + r.lastProblem
		}
	})
	cred, err := r.Get(ctx, Ask{MinValid: minValid})
	if errors.Is(err, login.ErrNeedsPerson) && r.Interactive {
		cred, err = r.withPerson(ctx, minValid)
	}
	if err != nil {
		return nil, err
	}
	if err := r.Apply(cred); err != nil {
		return nil, fmt.Errorf("could not use the new credential: %w", err)
	}
	r.set(func() {
		r.phase, r.message, r.applied, r.expires = Ready, "", true, cred.ExpirationTimestamp
		r.lastProblem = ""
		r.renewals++
	})
	return cred, nil
}

// withPerson waits for the turn to ask the person, then asks. Whoever
// waited for the turn behind another target's login of the same issuer
// is not asked again: the runner finds the session that login saved.
func (r *Renewer) withPerson(ctx context.Context, minValid time.Duration) (*credcache.Credential, error) {
	r.set(func() { r.phase, r.message = NeedsPerson, r.needsPersonMessage() })
	select {
	case r.turn() <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	defer func() { <-r.turn() }()
	return r.Get(ctx, Ask{MinValid: minValid, Person: true})
}
