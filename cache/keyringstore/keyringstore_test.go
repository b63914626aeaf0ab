package keyringstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/zalando/go-keyring"

	"github.com/pinniped-kit/pinniped/cache"
)

// These tests use go-keyring's in-memory mock; the e2e suite runs the same
// store against a real gnome-keyring over D-Bus.

func TestChunkedRoundTrip(t *testing.T) {
	defer forceChunkSize(1800)()
	keyring.MockInit()
	s := &Store{Service: "pinniped-test"}
	ctx := context.Background()
	for _, size := range []int{0, 10, 1800, 50 << 10} {
		v := make([]byte, size)
		_, _ = rand.Read(v) // incompressible: forces many chunks
		if err := s.Set(ctx, "k", v); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, "k")
		if err != nil || !bytes.Equal(got, v) {
			t.Fatalf("size %d: got %d bytes, %v", size, len(got), err)
		}
	}
	// Shrinking removes the now unused chunks.
	if err := s.Set(ctx, "k", []byte("small")); err != nil {
		t.Fatal(err)
	}
	if _, err := keyring.Get("pinniped-test", "k#1"); !errors.Is(err, keyring.ErrNotFound) {
		t.Fatalf("stale chunk left behind: %v", err)
	}
	if err := s.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, cache.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

func TestEveryStoredStringFitsWindows(t *testing.T) {
	defer forceChunkSize(1800)()
	keyring.MockInit()
	s := &Store{Service: "pinniped-test"}
	v := make([]byte, 20<<10)
	_, _ = rand.Read(v)
	if err := s.Set(context.Background(), "k", v); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		got, err := keyring.Get("pinniped-test", chunkKey("k", i))
		if err != nil {
			break
		}
		if len(got) > 2560 {
			t.Fatalf("chunk %d is %d bytes, over Windows' 2560", i, len(got))
		}
	}
}

func TestTornValueReadsAsMissing(t *testing.T) {
	defer forceChunkSize(1800)()
	keyring.MockInit()
	s := &Store{Service: "pinniped-test"}
	v := make([]byte, 10<<10)
	_, _ = rand.Read(v)
	if err := s.Set(context.Background(), "k", v); err != nil {
		t.Fatal(err)
	}
	_ = keyring.Set("pinniped-test", "k#1", "someone else's chunk")
	if _, err := s.Get(context.Background(), "k"); !errors.Is(err, cache.ErrNotFound) {
		t.Fatalf("torn value: %v", err)
	}
	_ = keyring.Set("pinniped-test", "k", "not our format")
	if _, err := s.Get(context.Background(), "k"); !errors.Is(err, cache.ErrNotFound) {
		t.Fatalf("foreign value: %v", err)
	}
}

// hangingProvider never answers, like a Secret Service waiting on a prompt.
type hangingProvider struct{}

func (hangingProvider) Set(string, string, string) error   { select {} }
func (hangingProvider) Get(string, string) (string, error) { select {} }
func (hangingProvider) Delete(string, string) error        { select {} }

func TestHungKeyringIsAbandoned(t *testing.T) {
	s := &Store{Service: "pinniped-test", Timeout: 100 * time.Millisecond, Backend: hangingProvider{}}
	start := time.Now()
	_, err := s.Get(context.Background(), "k")
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("want ErrTimeout, got %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("took %v", d)
	}
}

func TestNoSessionBusIsDetectedWithoutDBus(t *testing.T) {
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "")
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	s := &Store{Service: "pinniped-test"}
	if err := s.Unavailable(context.Background()); err == nil {
		t.Fatal("want unavailable")
	}
}

// forceChunkSize exercises the Windows/macOS chunking on any platform.
func forceChunkSize(n int) (restore func()) {
	old := chunkSize
	chunkSize = n
	return func() { chunkSize = old }
}
