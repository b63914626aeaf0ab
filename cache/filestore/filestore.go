// Package filestore keeps secrets as files in a private directory: 0700
// directory, 0600 files, each written to a temporary file, synced and
// renamed into place, so a crash or a concurrent reader never sees half a
// value. Reads hold to the same directory (privatedir's rule) and follow
// no link.
package filestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/pinniped-kit/pinniped/cache"
	"github.com/pinniped-kit/pinniped/cache/privatedir"
)

// Store implements cache.Store.
type Store struct {
	Dir string
}

var _ cache.Store = (*Store)(nil)

// Describe implements cache.Store.
func (s *Store) Describe() string { return s.Dir }

// name maps a key to a file name that is safe whatever the key contains.
func (s *Store) name(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16]) + ".cred"
}

// ensureDir creates the directory 0700, tightens one of this user's that
// others could enter, and refuses anything else (privatedir's rule).
func (s *Store) ensureDir() error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("create credential directory: %w", err)
	}
	if err := privatedir.Tighten(s.Dir); err != nil {
		return fmt.Errorf("credential directory: %w", err)
	}
	return nil
}

// Get implements cache.Store. A directory or file that breaks privatedir's
// rule is an error, not a miss: a miss would lead to a login that writes
// over whatever is there, and the user would never learn why.
func (s *Store) Get(_ context.Context, key string) ([]byte, error) {
	b, err := privatedir.ReadFile(s.Dir, s.name(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, cache.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read cached credential: %w", err)
	}
	return b, nil
}

// Set implements cache.Store.
func (s *Store) Set(_ context.Context, key string, value []byte) error {
	if err := s.ensureDir(); err != nil {
		return err
	}
	if err := privatedir.WriteFile(s.Dir, s.name(key), value); err != nil {
		return fmt.Errorf("write cached credential: %w", err)
	}
	return nil
}

// Delete implements cache.Store. It works in a directory of this user's
// that breaks privatedir's rule by letting others in, so that such a cache
// can be emptied; it never follows a link, in place of the directory or
// of the file, to remove the link's target.
func (s *Store) Delete(_ context.Context, key string) error {
	err := privatedir.Remove(s.Dir, s.name(key))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete cached credential: %w", err)
	}
	return nil
}

// RemoveAll removes every value, without reading any (and so without the
// indexes of the caches kept in it): for a store whose directory breaks
// privatedir's rule, which Delete can still empty. It returns how many
// values it removed.
func (s *Store) RemoveAll(context.Context) (int, error) {
	n, err := privatedir.RemoveMatching(s.Dir, func(name string) bool {
		return strings.HasSuffix(name, ".cred") || strings.HasPrefix(name, ".tmp-")
	})
	if errors.Is(err, fs.ErrNotExist) {
		return n, nil
	}
	if err != nil {
		return n, fmt.Errorf("delete cached credentials: %w", err)
	}
	return n, nil
}
