//go:build unix

package logout

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinniped-kit/pinniped/cache"
	"github.com/pinniped-kit/pinniped/cache/filestore"
	"github.com/pinniped-kit/pinniped/cache/privatedir"
	"github.com/pinniped-kit/pinniped/cli/login/loginflags/flagset"
)

// creds lists the credential files in dir.
func creds(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.cred"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestLogoutEmptiesACacheThatBreaksTheRule: a file cache whose directory
// lets others in cannot be read, but may hold the context's credential and
// session: logout, logout --all and status still deal with it, and say
// what is wrong with it and how to fix it.
func TestLogoutEmptiesACacheThatBreaksTheRule(t *testing.T) {
	env := map[string]string{"PINNIPED_USERNAME": "alice"}
	loose := func(t *testing.T, files cache.Store) string {
		t.Helper()
		dir := files.(*filestore.Store).Dir
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}

	t.Run("logout", func(t *testing.T) {
		args := supervisorLDAPArgs(t)
		kr, files, kubeconfig := setup(t, args, env)
		cacheLogin(t, kr, args, env)
		cacheLogin(t, files, args, env)
		dir := loose(t, files)
		before := len(creds(t, dir))
		out, err := runCmd(t, env, "logout", "--kubeconfig="+kubeconfig)
		if !errors.Is(err, privatedir.ErrNotPrivate) || !strings.Contains(err.Error(), "chmod 700 "+dir) || !strings.Contains(err.Error(), "removed from it by name") {
			t.Fatalf("%v\n%s", err, out)
		}
		// The credential and the session, not the two indexes.
		if after := len(creds(t, dir)); after != before-2 {
			t.Errorf("%d of %d files left", after, before)
		}
		empty(t, kr)
	})

	t.Run("logout --all and status", func(t *testing.T) {
		kr, files, _ := setup(t, ldapArgs, env)
		cacheLogin(t, kr, ldapArgs, env)
		cacheLogin(t, files, ldapArgs, env)
		dir := loose(t, files)
		listed, err := runCmd(t, nil, "status")
		if err != nil || !strings.Contains(listed, "OS keyring") || !strings.Contains(listed, "chmod 700 "+dir) {
			t.Fatalf("status: %v\n%s", err, listed)
		}
		out, err := runCmd(t, nil, "logout", "--all")
		if !errors.Is(err, privatedir.ErrNotPrivate) || !strings.Contains(err.Error(), "chmod 700 "+dir) {
			t.Fatalf("%v\n%s", err, out)
		}
		if left := creds(t, dir); len(left) != 0 {
			t.Errorf("left %v", left)
		}
		empty(t, kr)
	})

	t.Run("logout --all reports a session file that is a link", func(t *testing.T) {
		_, files, _ := setup(t, ldapArgs, env)
		cacheLogin(t, files, ldapArgs, env)
		dir := files.(*filestore.Store).Dir
		c, err := flagset.ParseOIDC(ldapArgs[2:], func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(c.SessionKey()))
		session := filepath.Join(dir, hex.EncodeToString(sum[:16])+".cred")
		target := filepath.Join(t.TempDir(), "elsewhere")
		if err := os.Rename(session, target); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, session); err != nil {
			t.Fatal(err)
		}
		out, err := runCmd(t, nil, "logout", "--all")
		if !errors.Is(err, privatedir.ErrNotPrivate) || !strings.Contains(err.Error(), session+" is a link") {
			t.Fatalf("want the link named: %v\n%s", err, out)
		}
		if left := creds(t, dir); len(left) != 0 {
			t.Errorf("left %v", left)
		}
		if _, err := os.Stat(target); err != nil {
			t.Errorf("the link's target: %v", err)
		}
	})

	t.Run("a link in place of the directory is not followed", func(t *testing.T) {
		_, files, kubeconfig := setup(t, ldapArgs, env)
		cacheLogin(t, files, ldapArgs, env)
		dir := files.(*filestore.Store).Dir
		target := filepath.Join(t.TempDir(), "elsewhere")
		if err := os.Rename(dir, target); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, dir); err != nil {
			t.Fatal(err)
		}
		before := len(creds(t, target))
		for _, args := range [][]string{{"--kubeconfig=" + kubeconfig}, {"--all"}} {
			out, err := runCmd(t, env, "logout", args...)
			if !errors.Is(err, privatedir.ErrNotPrivate) || !strings.Contains(err.Error(), "could not be removed") {
				t.Fatalf("%v: %v\n%s", args, err, out)
			}
		}
		if after := len(creds(t, target)); after != before || before == 0 {
			t.Errorf("the link's target held %d files, now %d", before, after)
		}
	})
}
