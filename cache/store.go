// Package cache stores login secrets (cluster credentials, OIDC sessions)
// behind one small interface, with the OS keyring and a private file
// directory as the two backends.
package cache

import (
	"context"
	"errors"
)

// ErrNotFound means the key has no value.
var ErrNotFound = errors.New("not found in the credential cache")

// Store is a secret key-value store. Keys are short ASCII strings; values are
// opaque bytes of any size.
type Store interface {
	Get(ctx context.Context, key string) ([]byte, error)
	Set(ctx context.Context, key string, value []byte) error
	Delete(ctx context.Context, key string) error
	// Describe says where values live, for people ("OS keyring", a path).
	Describe() string
}
