package credstore

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/cache/filestore"
	"github.com/pinniped-kit/pinniped/cache/keyringstore"
)

type hungBackend struct{}

func (hungBackend) Get(string, string) (string, error) { select {} }
func (hungBackend) Set(string, string, string) error   { select {} }
func (hungBackend) Delete(string, string) error        { select {} }

// TestHungKeyringIsRememberedAcrossProcesses: after one timeout, the next
// process goes straight to files instead of waiting again.
func TestHungKeyringIsRememberedAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	newStore := func(warn *bytes.Buffer) *fallbackStore {
		return &fallbackStore{
			primary:  &keyringstore.Store{Service: "t", Timeout: 200 * time.Millisecond, Backend: hungBackend{}},
			fallback: &filestore.Store{Dir: filepath.Join(dir, "files")},
			warn:     warn,
			marker:   filepath.Join(dir, "not-yet-created", "keyring-unresponsive"),
		}
	}
	ctx := context.Background()
	var warn bytes.Buffer
	start := time.Now()
	if err := newStore(&warn).Set(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 200*time.Millisecond || !bytes.Contains(warn.Bytes(), []byte("did not answer")) {
		t.Fatalf("first process: %v, warning %q", time.Since(start), warn.String())
	}

	warn.Reset()
	second := newStore(&warn)
	start = time.Now()
	got, err := second.Get(ctx, "k")
	if err != nil || string(got) != "v" {
		t.Fatalf("second process: %q %v", got, err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("second process waited %v on a keyring known to hang", d)
	}
}
