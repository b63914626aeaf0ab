package doctor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pinniped-kit/pinniped/cache/credcache"
)

func checkBackend(ctx context.Context, s *cacheFacts) Result {
	if s.kind == "" {
		return skip("%s", needsArgs)
	}
	switch s.mode {
	case "none":
		return ok("--credential-cache=none: nothing is cached, so every kubectl call logs in again")
	case "":
		if s.kind == "oidc" {
			return ok(`--credential-cache="": cluster credentials are not cached (sessions are)`)
		}
		return ok(`--credential-cache="": nothing is cached`)
	}
	b, err := s.d.f.Caches.Probe(ctx, s.mode)
	if err != nil {
		return fail(err.Error(), fmt.Sprintf("the credential cache cannot be opened (%v): fix --credential-cache in the exec entry, or the configuration directory's permissions", err))
	}
	switch {
	case b.Keyring && b.Fallback != nil:
		return warn(fmt.Sprintf("files in %s", b.Store),
			fmt.Sprintf("the OS keyring cannot be used (%v), so logins cache credentials in files (mode 0600) in %s: unlock or start a keyring (Secret Service, Keychain), or set --credential-cache=file to choose files", b.Fallback, b.Store))
	case b.Keyring:
		return ok("%s (it answered a lookup)", b.Store)
	}
	return ok("%s", b.Store)
}

func checkCredential(ctx context.Context, s *cacheFacts) Result {
	if s.kind == "" {
		return skip("%s", needsArgs)
	}
	if s.static != nil && s.conc == nil {
		// kubectl is handed the token itself; nothing is exchanged or cached.
		s.cred = &credcache.Credential{Token: s.static.Token}
		return ok("static login without the agent: the token itself is the credential")
	}
	if s.mode == "none" || s.mode == "" {
		return skip("this login caches no cluster credential (--credential-cache=%q)", s.mode)
	}
	// Every store a login may have written to, each on its own and only
	// read: the login's combined store would, on a keyring timeout, write
	// a marker, and Get deletes a corrupt entry. Read in the login's
	// order: the keyring, then the files it falls back to.
	stores, err := s.d.f.Caches.Everywhere(s.mode)
	if err != nil || len(stores) == 0 {
		return fail(fmt.Sprint(err), fmt.Sprintf("the credential cache cannot be opened (%v): fix --credential-cache in the exec entry", err))
	}
	key := s.login.CredentialKey(s.execCluster)
	var cred *credcache.Credential
	var where string
	var unread []error
	for _, store := range stores {
		c, found, err := (&credcache.Cache{Store: store, Now: s.d.f.Now}).Peek(ctx, key)
		switch {
		case errors.Is(err, credcache.ErrUnreadable):
			return warn(fmt.Sprintf("%s: %v", store.Describe(), err), fmt.Sprintf("the cached credential in %s is unreadable: run `pinniped logout`, then log in again with `kubectl get ns`", store.Describe()))
		case err != nil:
			unread = append(unread, fmt.Errorf("%s: %w", store.Describe(), err))
			continue
		case found:
			cred, where = c, store.Describe()
		}
		if cred != nil {
			break
		}
	}
	if cred == nil && len(unread) > 0 {
		err := errors.Join(unread...)
		return warn(err.Error(), fmt.Sprintf("the credential cache cannot be read (%v): unlock or start the keyring, or `pinniped logout` and log in again with `kubectl get ns`", err))
	}
	if cred == nil {
		return warn("none", "not logged in (no valid cluster credential is cached for this context): run `kubectl get ns` to log in, then run doctor again")
	}
	s.cred = cred
	s.secret(cred.Token, cred.ClientKeyData, cred.ClientCertificateData)
	what := "a token"
	if cred.ClientCertificateData != "" {
		what = "a client certificate"
	}
	left := cred.ExpirationTimestamp.Sub(s.d.f.Now()).Round(time.Second)
	return ok("%s in %s, valid until %s (%s more)", what, where, cred.ExpirationTimestamp.UTC().Format(time.RFC3339), left)
}
