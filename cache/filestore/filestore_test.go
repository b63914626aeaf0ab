package filestore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pinniped-kit/pinniped/cache"
	"github.com/pinniped-kit/pinniped/cache/filestore"
)

func TestRoundTripAndPermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pinniped", "credentials")
	s := &filestore.Store{Dir: dir}
	ctx := context.Background()
	if _, err := s.Get(ctx, "k"); !errors.Is(err, cache.ErrNotFound) {
		t.Fatalf("empty store: %v", err)
	}
	if err := s.Set(ctx, "k", []byte("secret")); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "k")
	if err != nil || string(got) != "secret" {
		t.Fatalf("%q %v", got, err)
	}
	info, _ := os.Stat(dir)
	if info.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v", info.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("want exactly one file (no temp files left), got %d", len(entries))
	}
	fi, _ := entries[0].Info()
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v", fi.Mode().Perm())
	}
	if err := s.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, cache.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if err := s.Delete(ctx, "k"); err != nil {
		t.Fatalf("deleting a missing key must succeed: %v", err)
	}
}

func TestTightensLooseDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &filestore.Store{Dir: dir}
	if err := s.Set(context.Background(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	info, _ := os.Stat(dir)
	if info.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v, want 0700", info.Mode().Perm())
	}
}

// TestConcurrentWritersNeverTear: readers racing writers see a whole value,
// old or new, never a mix.
func TestConcurrentWritersNeverTear(t *testing.T) {
	s := &filestore.Store{Dir: t.TempDir()}
	ctx := context.Background()
	values := make([][]byte, 8)
	for i := range values {
		values[i] = bytes.Repeat([]byte{byte('a' + i)}, 64<<10)
	}
	if err := s.Set(ctx, "k", values[0]); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range values {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 20 {
				if err := s.Set(ctx, "k", values[i]); err != nil {
					errs <- err
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 20 {
				got, err := s.Get(ctx, "k")
				if err != nil {
					errs <- err
					continue
				}
				if len(got) != 64<<10 || !bytes.Equal(got, bytes.Repeat(got[:1], len(got))) {
					errs <- fmt.Errorf("torn read: %d bytes", len(got))
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestPlantedCredentialIsRefused: a value file another user wrote (in a
// directory others could write to) is never read as this user's, and a
// directory another user owns is never written to.
func TestPlantedCredentialIsRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to make files another user owns")
	}
	s := &filestore.Store{Dir: t.TempDir()}
	ctx := context.Background()
	if err := s.Set(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(s.Dir, "*.cred"))
	if len(files) != 1 {
		t.Fatalf("files %v", files)
	}
	if err := os.Chown(files[0], 12345, 12345); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get(ctx, "k"); err == nil || !strings.Contains(err.Error(), "another user") {
		t.Fatalf("read a planted value: %q %v", v, err)
	}
	if err := os.Chown(s.Dir, 12345, 12345); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(ctx, "k2", []byte("v")); err == nil || !strings.Contains(err.Error(), "belongs to another user") {
		t.Fatalf("wrote into another user's directory: %v", err)
	}
}
