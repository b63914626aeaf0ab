package filestore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pinniped-kit/pinniped/cache"
	"github.com/pinniped-kit/pinniped/cache/filestore"
	"github.com/pinniped-kit/pinniped/cache/privatedir"
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

// credFile is the file Set made for key: the one that appeared.
func credFile(t *testing.T, s *filestore.Store, key, value string) string {
	t.Helper()
	before, _ := os.ReadDir(s.Dir)
	if err := s.Set(context.Background(), key, []byte(value)); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadDir(s.Dir)
	for _, e := range after {
		if !slices.ContainsFunc(before, func(b os.DirEntry) bool { return b.Name() == e.Name() }) {
			return filepath.Join(s.Dir, e.Name())
		}
	}
	t.Fatalf("Set(%s) made no file", key)
	return ""
}

// TestLinkForAnotherKeyIsRefused: a link named for cluster B's key that
// points at cluster A's credential must not make B's read return A's.
func TestLinkForAnotherKeyIsRefused(t *testing.T) {
	s := &filestore.Store{Dir: filepath.Join(t.TempDir(), "creds")}
	a := credFile(t, s, "cluster-a", "credential-of-a")
	b := credFile(t, s, "cluster-b", "credential-of-b")
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(a, b); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(context.Background(), "cluster-b")
	if err == nil || errors.Is(err, cache.ErrNotFound) || !errors.Is(err, privatedir.ErrNotPrivate) {
		t.Fatalf("Get through a link: %q, %v; want a refusal", got, err)
	}
	if !strings.Contains(err.Error(), "is a link") || !strings.Contains(err.Error(), "rm "+b) {
		t.Errorf("the refusal does not say what to fix: %v", err)
	}
}

// TestLooseDirectoryIsRefusedForReads: a directory others may enter is
// refused, saying how to fix it, not read and not taken for a miss.
func TestLooseDirectoryIsRefusedForReads(t *testing.T) {
	s := &filestore.Store{Dir: filepath.Join(t.TempDir(), "creds")}
	credFile(t, s, "k", "v")
	if err := os.Chmod(s.Dir, 0o755); err != nil { //nolint:gosec // the loose mode under test
		t.Fatal(err)
	}
	got, err := s.Get(context.Background(), "k")
	if err == nil || errors.Is(err, cache.ErrNotFound) || !strings.Contains(err.Error(), "chmod 700 "+s.Dir) {
		t.Fatalf("Get in a 0755 directory: %q, %v; want a refusal naming chmod 700", got, err)
	}
}

// TestOthersDirectoryOrFileIsRefused: needs root, to give them away.
func TestOthersDirectoryOrFileIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another user needs root")
	}
	const nobody = 65534
	s := &filestore.Store{Dir: filepath.Join(t.TempDir(), "creds")}
	f := credFile(t, s, "k", "v")
	if err := os.Chown(f, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(context.Background(), "k"); err == nil || !strings.Contains(err.Error(), "belongs to another user") {
		t.Fatalf("another user's file: %q, %v", got, err)
	}
	if err := os.Chown(f, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(s.Dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(context.Background(), "k"); err == nil || !strings.Contains(err.Error(), "belongs to another user") {
		t.Fatalf("another user's directory: %q, %v", got, err)
	}
	if err := s.Set(context.Background(), "k", []byte("w")); err == nil || !strings.Contains(err.Error(), "belongs to another user") {
		t.Fatalf("a write into another user's directory: %v", err)
	}
}
