// Package credstore opens the store `pinniped login` caches credentials in:
// the OS keyring with a file fallback, files, or nothing. It is shared by the
// lean front binary (which answers kubectl from the cache) and the engine, so
// both always read and write the same place.
package credstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pinniped-kit/pinniped/cache"
	"github.com/pinniped-kit/pinniped/cache/filestore"
	"github.com/pinniped-kit/pinniped/cache/keyringstore"
)

// Places are where one environment's caches live: its $XDG_CONFIG_HOME,
// else this process's home directory. Getenv is the environment (the
// process's, or the one a test gives).
type Places struct {
	Getenv func(string) string
}

// ForProcess are the places of this process's environment.
func ForProcess() Places { return Places{Getenv: os.Getenv} }

// DefaultLockDir keeps lock files beside the file cache.
func (p Places) DefaultLockDir() (string, error) {
	dir, err := p.ConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "locks"), nil
}

// LockDir is where the locks for a --credential-cache mode live: beside
// the files of a path, else beside the default file cache. With no cache
// at all, a configuration directory that cannot be used only costs the
// single-flight of concurrent logins (""), never the login itself.
func (p Places) LockDir(mode string) (string, error) {
	if isPath(mode) {
		return filepath.Join(filepath.Dir(mode), "pinniped-locks"), nil
	}
	dir, err := p.DefaultLockDir()
	if err != nil && mode == "none" {
		return "", nil
	}
	return dir, err
}

func isPath(mode string) bool { return strings.ContainsAny(mode, `/\`) }

// ConfigDir is $XDG_CONFIG_HOME/pinniped or ~/.config/pinniped. Without a
// home directory it is <tmp>/pinniped-<uid>, a predictable name in a
// directory everyone can write: it is used only if this user owns it, it is
// a real directory and nobody else may enter it (see privateTempDir).
func (p Places) ConfigDir() (string, error) {
	if d := p.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "pinniped"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return privateTempDir(filepath.Join(os.TempDir(), "pinniped-"+strconvUID()))
	}
	return filepath.Join(home, ".config", "pinniped"), nil
}

// Open returns the store the --credential-cache flag asks for:
// "keyring" (default; falls back to files when no keyring works), "file",
// "none", or a path (upstream Pinniped's form), meaning files in its directory.
func (p Places) Open(mode string, warn io.Writer) (cache.Store, error) {
	if mode == "" || mode == "none" {
		return nil, nil
	}
	// A path names its own directory; only the other modes need ours.
	if isPath(mode) {
		return &filestore.Store{Dir: filepath.Join(filepath.Dir(mode), "pinniped-credentials")}, nil
	}
	config, err := p.ConfigDir()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(config, "credentials")
	switch mode {
	case "file":
		return &filestore.Store{Dir: dir}, nil
	case "keyring":
		return &fallbackStore{
			primary:  &keyringstore.Store{Service: "pinniped"},
			fallback: &filestore.Store{Dir: dir},
			warn:     warn,
			marker:   filepath.Join(config, "keyring-unresponsive"),
		}, nil
	}
	return nil, fmt.Errorf("--credential-cache %q: use keyring, file, none, or a file path", mode)
}

// fallbackStore uses the keyring until it proves unusable (anything but
// "not found"), then files for the rest of the process. It says so once,
// when it first writes a credential to a file: kubectl shows a plugin's
// stderr on every call, and a warning on every cache hit would be noise.
type fallbackStore struct {
	primary  *keyringstore.Store
	fallback cache.Store
	warn     io.Writer

	// marker remembers, across processes, that the keyring hung recently,
	// so each kubectl call does not wait out the timeout again.
	marker string

	once     sync.Once
	checked  bool
	useFiles bool
	why      error
	mu       sync.Mutex
}

// hungFor is how long a hung keyring is skipped before being tried again.
const hungFor = 2 * time.Minute

func (s *fallbackStore) pick() cache.Store {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.checked {
		s.checked = true
		// Without a session bus, do not touch D-Bus at all.
		if err := s.primary.UnavailableWithoutCalling(); err != nil {
			s.switchToFiles(err)
		} else if info, err := os.Stat(s.marker); s.marker != "" && err == nil && time.Since(info.ModTime()) < hungFor {
			s.switchToFiles(fmt.Errorf("it did not answer in time at %s; trying it again after %s",
				info.ModTime().Format(time.Kitchen), info.ModTime().Add(hungFor).Format(time.Kitchen)))
		}
	}
	if s.useFiles {
		return s.fallback
	}
	return s.primary
}

func (s *fallbackStore) switchToFiles(err error) {
	s.useFiles = true
	s.why = err
}

func (s *fallbackStore) run(fn func(cache.Store) error) error {
	st := s.pick()
	err := fn(st)
	if err == nil || errors.Is(err, cache.ErrNotFound) || st == s.fallback {
		return err
	}
	if errors.Is(err, keyringstore.ErrTimeout) && s.marker != "" {
		_ = os.MkdirAll(filepath.Dir(s.marker), 0o700)
		if f, ferr := os.OpenFile(s.marker, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); ferr == nil {
			_ = f.Close()
			now := time.Now()
			_ = os.Chtimes(s.marker, now, now)
		}
	}
	s.mu.Lock()
	s.switchToFiles(err)
	s.mu.Unlock()
	return fn(s.fallback)
}

func (s *fallbackStore) Get(ctx context.Context, key string) (v []byte, err error) {
	err = s.run(func(st cache.Store) error { v, err = st.Get(ctx, key); return err })
	if errors.Is(err, cache.ErrNotFound) && s.pick() != s.fallback {
		// Written to files while the keyring was unavailable.
		return s.fallback.Get(ctx, key)
	}
	return v, err
}

func (s *fallbackStore) Set(ctx context.Context, key string, value []byte) error {
	return s.run(func(st cache.Store) error {
		if st == s.fallback {
			s.once.Do(func() {
				fmt.Fprintf(s.warn, "! OS keyring unavailable (%v); keeping credentials in %s (mode 0600) instead\n", s.why, s.fallback.Describe())
			})
		}
		return st.Set(ctx, key, value)
	})
}

// Delete removes the value from both stores: Get reads the files when the
// keyring has nothing, so a copy written there while the keyring was
// unavailable would otherwise come back once it works again.
func (s *fallbackStore) Delete(ctx context.Context, key string) error {
	err := s.run(func(st cache.Store) error { return st.Delete(ctx, key) })
	if s.pick() != s.fallback {
		err = errors.Join(err, s.fallback.Delete(ctx, key))
	}
	return err
}

func (s *fallbackStore) Describe() string {
	return s.pick().Describe()
}

// Everywhere returns every store a login with --credential-cache=mode may
// have written to, each on its own, for logout and status to look in: for
// the keyring mode, the OS keyring (unless there is surely none here) and
// its file fallback, where copies are written while the keyring is
// unavailable. Calls to the keyring may then fail; the caller says so and
// goes on with the files.
func (p Places) Everywhere(mode string) ([]cache.Store, error) {
	st, err := p.Open(mode, io.Discard)
	if err != nil || st == nil {
		return nil, err
	}
	f, ok := st.(*fallbackStore)
	if !ok {
		return []cache.Store{st}, nil
	}
	if f.primary.UnavailableWithoutCalling() != nil {
		return []cache.Store{f.fallback}, nil //nolint:nilerr // no keyring here: the files are all there is
	}
	return []cache.Store{f.primary, f.fallback}, nil
}

// Backend is where a login with some --credential-cache mode would cache,
// as Probe found it.
type Backend struct {
	// Store is where values would go ("" for nowhere), as people read it.
	Store string
	// Keyring is set when the mode asks for the OS keyring.
	Keyring bool
	// Fallback says why a login with the keyring mode would use files
	// instead (nil when the keyring answers).
	Fallback error
}

// Probe says which store a login with mode would use here, without
// writing anything: for the keyring mode it asks the keyring for a name
// that does not exist (an answer of "not found" means it works), after
// the same checks a login makes first (a session bus; a recent hang).
func (p Places) Probe(ctx context.Context, mode string) (Backend, error) {
	st, err := p.Open(mode, io.Discard)
	if err != nil || st == nil {
		return Backend{}, err
	}
	f, ok := st.(*fallbackStore)
	if !ok {
		return Backend{Store: st.Describe()}, nil
	}
	return f.probe(ctx), nil
}

func (s *fallbackStore) probe(ctx context.Context) Backend {
	b := Backend{Keyring: true, Store: s.primary.Describe()}
	if s.pick() == s.fallback {
		b.Store, b.Fallback = s.fallback.Describe(), s.why
		return b
	}
	if err := s.primary.Unavailable(ctx); err != nil {
		b.Store, b.Fallback = s.fallback.Describe(), err
	}
	return b
}

// IsKeyring reports whether st is the OS keyring, which may not answer (no
// D-Bus session, a locked keyring): commands report that and go on with
// the files.
func IsKeyring(st cache.Store) bool {
	_, ok := st.(*keyringstore.Store)
	return ok
}
