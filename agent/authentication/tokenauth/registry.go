// Package tokenauth keeps the live set of token authenticators the admin
// configured with JWTAuthenticator and WebhookAuthenticator resources. The
// exchange API and the impersonation proxy both read from it; controllers
// write to it as the resources change.
package tokenauth

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apiserver/pkg/authentication/authenticator"
)

// Key names one authenticator resource.
type Key struct {
	Kind string // JWTAuthenticator or WebhookAuthenticator
	Name string
}

func (k Key) String() string { return k.Kind + "/" + k.Name }

// RefusedError is an authenticator's refusal with its own words, which may
// name the person (a webhook's status.error): the message leaves them out,
// and callers add Detail only where identities may be logged.
type RefusedError struct {
	By, Detail string
}

func (e *RefusedError) Error() string { return e.By + " refused the token" }

// ErrNotFound means no ready authenticator has that key.
var ErrNotFound = errors.New("no such authenticator, or it is not ready")

// Registry is safe for concurrent use. Lookups take a read lock only, so
// exchanges never wait on each other.
type Registry struct {
	mu    sync.RWMutex
	items map[Key]authenticator.Token
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{items: map[Key]authenticator.Token{}}
}

// Set installs or replaces an authenticator.
func (r *Registry) Set(k Key, a authenticator.Token) {
	r.mu.Lock()
	old := r.items[k]
	r.items[k] = a
	r.mu.Unlock()
	release(old)
}

// Delete removes an authenticator; tokens it accepted stop working at once.
func (r *Registry) Delete(k Key) {
	r.mu.Lock()
	old := r.items[k]
	delete(r.items, k)
	r.mu.Unlock()
	release(old)
}

// idleCloser is an authenticator that keeps connections open (a webhook's
// HTTP client); requests in flight are not affected.
type idleCloser interface{ CloseIdleConnections() }

// release lets a replaced or removed authenticator's idle connections go
// now rather than at their idle timeout.
func release(a authenticator.Token) {
	if c, ok := a.(idleCloser); ok {
		c.CloseIdleConnections()
	}
}

// Keys lists the installed authenticators.
func (r *Registry) Keys() []Key {
	r.mu.RLock()
	defer r.mu.RUnlock()
	keys := make([]Key, 0, len(r.items))
	for k := range r.items {
		keys = append(keys, k)
	}
	return keys
}

// AuthenticateToken validates token with the authenticator named by k.
func (r *Registry) AuthenticateToken(ctx context.Context, k Key, token string) (*authenticator.Response, error) {
	r.mu.RLock()
	a, ok := r.items[k]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%s: %w", k, ErrNotFound)
	}
	resp, ok, err := a.AuthenticateToken(ctx, token)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %w", k, err)
	case !ok || resp == nil:
		return nil, fmt.Errorf("%s: token rejected", k)
	}
	return resp, nil
}
