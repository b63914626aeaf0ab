// Package keyringstore keeps secrets in the OS keyring (macOS Keychain,
// Windows Credential Manager, Secret Service on Linux) via
// github.com/zalando/go-keyring, and makes it safe to call from kubectl:
//
//   - every call has a timeout, because Secret Service can block forever on
//     an unlock prompt nobody sees;
//   - values are split into chunks, because Windows caps a credential at
//     2560 bytes and macOS at about 3 KB;
//   - chunks carry a checksum, so a value torn by a concurrent writer reads
//     as missing, never as garbage;
//   - on Linux with no session bus it reports "unavailable" without calling
//     D-Bus at all, because godbus would otherwise spawn dbus-launch and
//     leave daemons behind.
package keyringstore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/zalando/go-keyring"

	"github.com/pinniped-kit/pinniped/cache"
)

// DefaultTimeout bounds one keyring call (gh uses 3 s for the same reason).
const DefaultTimeout = 3 * time.Second

// chunkSize keeps each stored string under the platform's limit once the key
// name and encoding overhead are added: Windows caps a credential at 2560
// bytes, macOS at about 3 KB; Secret Service has no practical limit, so
// Linux stores one string and pays for one D-Bus round trip.
var chunkSize = chunkSizeFor(runtime.GOOS)

func chunkSizeFor(goos string) int {
	switch goos {
	case "windows", "darwin":
		return 1800
	}
	return 1 << 20
}

// ErrTimeout means the keyring did not answer in time.
var ErrTimeout = errors.New("the OS keyring did not answer in time (is it locked, waiting for a password prompt?)")

// Backend is the keyring API; tests substitute it.
type Backend interface {
	Get(service, user string) (string, error)
	Set(service, user, password string) error
	Delete(service, user string) error
}

// goKeyring is the real OS keyring.
type goKeyring struct{}

func (goKeyring) Get(service, user string) (string, error) { return keyring.Get(service, user) }
func (goKeyring) Set(service, user, password string) error {
	return keyring.Set(service, user, password)
}
func (goKeyring) Delete(service, user string) error { return keyring.Delete(service, user) }

// Store implements cache.Store.
type Store struct {
	Service string
	Timeout time.Duration
	// Backend defaults to the OS keyring.
	Backend Backend
}

func (s *Store) backend() Backend {
	if s.Backend == nil {
		return goKeyring{}
	}
	return s.Backend
}

var _ cache.Store = (*Store)(nil)

// Describe implements cache.Store.
func (s *Store) Describe() string { return "OS keyring" }

// Unavailable says why the keyring cannot be used here, or returns nil. It
// checks for a session bus first (no side effects), then asks the keyring
// for a key that does not exist.
func (s *Store) Unavailable(ctx context.Context) error {
	if err := s.UnavailableWithoutCalling(); err != nil {
		return err
	}
	_, err := s.call(ctx, func() (string, error) { return s.backend().Get(s.Service, "pinniped-availability-probe") })
	if err == nil || errors.Is(err, keyring.ErrNotFound) {
		return nil
	}
	return err
}

// UnavailableWithoutCalling reports what can be known without talking to the
// keyring: on Linux, whether a D-Bus session bus exists at all. godbus would
// otherwise run dbus-launch and leave daemons behind.
func (s *Store) UnavailableWithoutCalling() error {
	if s.Backend != nil {
		return nil // a substituted backend needs no bus
	}
	if runtime.GOOS == "linux" || runtime.GOOS == "freebsd" {
		if os.Getenv("DBUS_SESSION_BUS_ADDRESS") == "" {
			dir := os.Getenv("XDG_RUNTIME_DIR")
			if dir == "" {
				return errors.New("no D-Bus session (DBUS_SESSION_BUS_ADDRESS and XDG_RUNTIME_DIR are unset)")
			}
			if _, err := os.Stat(filepath.Join(dir, "bus")); err != nil { //nolint:gosec // only checks existence of the user's own bus socket
				return errors.New("no D-Bus session bus at $XDG_RUNTIME_DIR/bus")
			}
		}
	}
	return nil
}

func (s *Store) call(ctx context.Context, fn func() (string, error)) (string, error) {
	timeout := s.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	type result struct {
		v   string
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := fn()
		ch <- result{v, err}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-t.C:
		// The goroutine may stay blocked; the process is short-lived.
		return "", ErrTimeout
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func chunkKey(key string, i int) string {
	if i == 0 {
		return key
	}
	return key + "#" + strconv.Itoa(i)
}

// format tags the value encoding in the header: "pv2" is base64 of the
// value. A value of another format (pre-release builds wrote "pv1") is a
// miss, and the next write replaces it, chunks and all.
const format = "pv2"

// header is "<format>:<chunks>:<sha256 of the encoded value, 16 hex>:".
func header(n int, sum string) string { return fmt.Sprintf("%s:%d:%s:", format, n, sum) }

func parseHeader(v string) (tag string, n int, sum, rest string, ok bool) {
	parts := strings.SplitN(v, ":", 4)
	// Any version's header, so chunks are counted (and deleted) alike.
	if len(parts) != 4 || !strings.HasPrefix(parts[0], "pv") {
		return "", 0, "", "", false
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil || n < 1 || n > 1024 {
		return "", 0, "", "", false
	}
	return parts[0], n, parts[2], parts[3], true
}

func checksum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

// Get implements cache.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	first, err := s.call(ctx, func() (string, error) { return s.backend().Get(s.Service, key) })
	if errors.Is(err, keyring.ErrNotFound) {
		return nil, cache.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read from the OS keyring: %w", err)
	}
	tag, n, sum, encoded, ok := parseHeader(first)
	if !ok || tag != format {
		return nil, cache.ErrNotFound // not ours, or a format this binary does not read
	}
	var b strings.Builder
	b.WriteString(encoded)
	for i := 1; i < n; i++ {
		part, err := s.call(ctx, func() (string, error) { return s.backend().Get(s.Service, chunkKey(key, i)) })
		if errors.Is(err, keyring.ErrNotFound) {
			return nil, cache.ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("read from the OS keyring: %w", err)
		}
		b.WriteString(part)
	}
	if checksum(b.String()) != sum {
		return nil, cache.ErrNotFound // torn by a concurrent writer
	}
	return decode(b.String())
}

// Set implements cache.Store.
func (s *Store) Set(ctx context.Context, key string, value []byte) error {
	encoded := encode(value)
	var chunks []string
	for len(encoded) > chunkSize {
		chunks = append(chunks, encoded[:chunkSize])
		encoded = encoded[chunkSize:]
	}
	chunks = append(chunks, encoded)
	full := strings.Join(chunks, "")
	oldN := s.chunkCount(ctx, key)

	// Extra chunks first, the header last: until the header is replaced,
	// readers see the old value (or, mid-write, a checksum mismatch).
	for i := len(chunks) - 1; i >= 0; i-- {
		v := chunks[i]
		if i == 0 {
			v = header(len(chunks), checksum(full)) + v
		}
		k := chunkKey(key, i)
		if _, err := s.call(ctx, func() (string, error) { return "", s.backend().Set(s.Service, k, v) }); err != nil {
			return fmt.Errorf("write to the OS keyring: %w", err)
		}
	}
	for i := len(chunks); i < oldN; i++ {
		k := chunkKey(key, i)
		_, _ = s.call(ctx, func() (string, error) { return "", s.backend().Delete(s.Service, k) })
	}
	return nil
}

func (s *Store) chunkCount(ctx context.Context, key string) int {
	first, err := s.call(ctx, func() (string, error) { return s.backend().Get(s.Service, key) })
	if err != nil {
		return 0
	}
	_, n, _, _, ok := parseHeader(first)
	if !ok {
		return 1
	}
	return n
}

// Delete implements cache.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	n := s.chunkCount(ctx, key)
	for i := max(n, 1) - 1; i >= 0; i-- {
		k := chunkKey(key, i)
		_, err := s.call(ctx, func() (string, error) { return "", s.backend().Delete(s.Service, k) })
		if err != nil && !errors.Is(err, keyring.ErrNotFound) {
			return fmt.Errorf("delete from the OS keyring: %w", err)
		}
	}
	return nil
}

func encode(value []byte) string {
	return base64.RawStdEncoding.EncodeToString(value)
}

func decode(s string) ([]byte, error) {
	raw, err := base64.RawStdEncoding.DecodeString(s)
	if err != nil {
		return nil, cache.ErrNotFound
	}
	return raw, nil
}
