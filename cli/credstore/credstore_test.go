package credstore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zalando/go-keyring"

	"github.com/pinniped-kit/pinniped/cache"
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

// memBackend is a keyring that works.
type memBackend struct{ m map[string]string }

func (b *memBackend) Get(service, user string) (string, error) {
	v, ok := b.m[service+"/"+user]
	if !ok {
		return "", keyring.ErrNotFound
	}
	return v, nil
}

func (b *memBackend) Set(service, user, value string) error {
	b.m[service+"/"+user] = value
	return nil
}

func (b *memBackend) Delete(service, user string) error {
	if _, ok := b.m[service+"/"+user]; !ok {
		return keyring.ErrNotFound
	}
	delete(b.m, service+"/"+user)
	return nil
}

// TestDeleteReachesTheFileCopy: a value written to files while the keyring
// hung is gone after a Delete made once the keyring works again; it does
// not come back through the fallback read.
func TestDeleteReachesTheFileCopy(t *testing.T) {
	dir := t.TempDir()
	files := &filestore.Store{Dir: filepath.Join(dir, "files")}
	ctx := context.Background()
	hung := &fallbackStore{
		primary:  &keyringstore.Store{Service: "t", Timeout: 100 * time.Millisecond, Backend: hungBackend{}},
		fallback: files, warn: &bytes.Buffer{},
	}
	if err := hung.Set(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	working := &fallbackStore{
		primary:  &keyringstore.Store{Service: "t", Backend: &memBackend{m: map[string]string{}}},
		fallback: files, warn: &bytes.Buffer{},
	}
	if got, err := working.Get(ctx, "k"); err != nil || string(got) != "v" {
		t.Fatalf("the file copy is not read: %q %v", got, err)
	}
	if err := working.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if got, err := working.Get(ctx, "k"); !errors.Is(err, cache.ErrNotFound) {
		t.Fatalf("after Delete the value came back: %q %v", got, err)
	}
}

type answers struct{ err error }

func (a answers) Get(string, string) (string, error) { return "", a.err }
func (a answers) Set(string, string, string) error   { return a.err }
func (a answers) Delete(string, string) error        { return a.err }

func TestProbe(t *testing.T) {
	dir := t.TempDir()
	p := Places{Getenv: func(k string) string {
		if k == "XDG_CONFIG_HOME" {
			return dir
		}
		return ""
	}}
	ctx := context.Background()
	for mode, want := range map[string]string{
		"file": filepath.Join(dir, "pinniped", "credentials"), "none": "", "": "",
		filepath.Join(dir, "x", "cache.yaml"): filepath.Join(dir, "x", "pinniped-credentials"),
	} {
		b, err := p.Probe(ctx, mode)
		if err != nil || b.Keyring || b.Fallback != nil || !bytes.Contains([]byte(b.Store), []byte(want)) || (want == "") != (b.Store == "") {
			t.Errorf("%q: %+v %v", mode, b, err)
		}
	}
	if _, err := p.Probe(ctx, "vault"); err == nil {
		t.Error("an unknown mode probed")
	}
	store := func(backend keyringstore.Backend) *fallbackStore {
		return &fallbackStore{primary: &keyringstore.Store{Service: "t", Timeout: 100 * time.Millisecond, Backend: backend},
			fallback: &filestore.Store{Dir: filepath.Join(dir, "files")}, warn: &bytes.Buffer{}, marker: filepath.Join(dir, "marker")}
	}
	// "Not found" is a keyring that works; the probe writes nothing.
	if b := store(answers{keyring.ErrNotFound}).probe(ctx); !b.Keyring || b.Fallback != nil || b.Store != "OS keyring" {
		t.Errorf("working keyring: %+v", b)
	}
	locked := errors.New("the collection is locked")
	if b := store(answers{locked}).probe(ctx); !errors.Is(b.Fallback, locked) || b.Store == "OS keyring" {
		t.Errorf("failing keyring: %+v", b)
	}
	if b := store(hungBackend{}).probe(ctx); !errors.Is(b.Fallback, keyringstore.ErrTimeout) {
		t.Errorf("hung keyring: %+v", b)
	}
	// pinniped doctor probes: even a hung keyring leaves no marker (that
	// is a login's to write) and no file behind.
	for _, p := range []string{filepath.Join(dir, "marker"), filepath.Join(dir, "files")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("the probe wrote %s", p)
		}
	}
}
