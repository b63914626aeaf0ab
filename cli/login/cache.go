package login

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cache/lock"
	"github.com/pinniped-kit/pinniped/cache/privatedir"
)

func (r *Runner) credCache(req Request) *credcache.Cache {
	if r.Store == nil || r.NoCredentialCache {
		return nil
	}
	return &credcache.Cache{Store: r.Store, Now: r.Now, LockDir: r.LockDir, Skew: req.MinValid}
}

// skew is the validity a cached credential must have left to be used.
func skew(req Request) time.Duration {
	if req.MinValid > 0 {
		return req.MinValid
	}
	return credcache.DefaultSkew
}

// seconds writes d as debug lines always have ("30 s").
func seconds(d time.Duration) string {
	return strconv.FormatInt(int64(d.Round(time.Second)/time.Second), 10) + " s"
}

// cached is the valid credential cached under key, if any. A cache that
// breaks the rule of a private directory (a link, another user's file, a
// directory others may enter) is an error, not a miss: logging in again
// would write over what is there, and the person would never learn why.
func (r *Runner) cached(ctx context.Context, c *credcache.Cache, key string) (*credcache.Credential, bool, error) {
	if c == nil {
		return nil, false, nil
	}
	cred, ok, err := c.Get(ctx, key)
	if errors.Is(err, privatedir.ErrNotPrivate) {
		return nil, false, fmt.Errorf("refusing the credential cache: %w", err)
	}
	if err != nil {
		// Anything else (a corrupt entry, a keyring that does not answer)
		// costs only a new login.
		r.UI.Warn("the credential cache is unreadable ("+err.Error()+")", "logging in again")
		return nil, false, nil //nolint:nilerr // a miss, said to the person
	}
	return cred, ok, nil
}

func (r *Runner) lock(ctx context.Context, key string, interactive bool) (func(), error) {
	return r.lockName(ctx, key, r.lockTimeout(interactive))
}

// lockTimeout bounds the wait for another process's login: longer when a
// person may be typing a password in it.
func (r *Runner) lockTimeout(interactive bool) time.Duration {
	if r.LockTimeout != 0 {
		return r.LockTimeout
	}
	if interactive {
		return 15 * time.Minute
	}
	return 2 * time.Minute
}

// lockName takes the cross-process lock called name, waiting up to timeout.
func (r *Runner) lockName(ctx context.Context, name string, timeout time.Duration) (func(), error) {
	if r.Store == nil {
		return func() {}, nil
	}
	release, skipped, err := lock.Hold(ctx, r.LockDir, name, timeout)
	switch {
	case skipped != nil:
		// A lock only keeps concurrent kubectl calls to one login, and
		// where no lock file can be made (read-only, full) nobody else
		// holds one: that must not cost the login itself. Any other
		// failure may hide another process's lock, and a second login
		// racing it could spend a single-use refresh token twice.
		r.lockWarning.Do(func() {
			r.UI.Warn("could not take the login lock ("+skipped.Error()+")", "logging in without it; check the cache directory's disk")
		})
	case errors.Is(err, fs.ErrPermission):
		return nil, fmt.Errorf("%w (the lock directory %s is not writable by you, perhaps made by another user such as root: fix its owner or permissions)", err, r.LockDir)
	case err != nil:
		return nil, err
	}
	return release, nil
}
