package doctor

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/pinniped-kit/pinniped/cache/credcache"
)

func checkBackend(ctx context.Context, r *run) Result {
	if r.kind == "" {
		return skip("%s", needsArgs)
	}
	switch r.mode {
	case "none":
		return ok("--credential-cache=none: nothing is cached, so every kubectl call logs in again")
	case "":
		if r.kind == "oidc" {
			return ok(`--credential-cache="": cluster credentials are not cached (sessions are)`)
		}
		return ok(`--credential-cache="": nothing is cached`)
	}
	b, err := r.d.Backend(ctx, r.mode)
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

func checkCredential(ctx context.Context, r *run) Result {
	if r.kind == "" {
		return skip("%s", needsArgs)
	}
	if r.static != nil && r.conc == nil {
		// kubectl is handed the token itself; nothing is exchanged or cached.
		r.cred = &credcache.Credential{Token: r.static.Token}
		return ok("static login without the agent: the token itself is the credential")
	}
	if r.mode == "none" || r.mode == "" {
		return skip("this login caches no cluster credential (--credential-cache=%q)", r.mode)
	}
	store, err := r.d.Caches.Open(r.mode, io.Discard)
	if err != nil || store == nil {
		return fail(fmt.Sprint(err), fmt.Sprintf("the credential cache cannot be opened (%v): fix --credential-cache in the exec entry", err))
	}
	var key string
	if r.oidc != nil {
		key = r.oidc.CredentialKey(r.execCluster)
	} else {
		key = r.static.CredentialKey(r.execCluster)
	}
	cred, found, err := (&credcache.Cache{Store: store, Now: r.d.Now}).Get(ctx, key)
	if err != nil {
		return warn(err.Error(), fmt.Sprintf("the cached credential in %s cannot be read (%v): `pinniped logout` and log in again with `kubectl get ns`", store.Describe(), err))
	}
	if !found {
		return warn("none", "not logged in (no valid cluster credential is cached for this context): run `kubectl get ns` to log in, then run doctor again")
	}
	r.cred = cred
	r.secret(cred.Token, cred.ClientKeyData, cred.ClientCertificateData)
	what := "a token"
	if cred.ClientCertificateData != "" {
		what = "a client certificate"
	}
	left := cred.ExpirationTimestamp.Sub(r.d.Now()).Round(time.Second)
	return ok("%s in %s, valid until %s (%s more)", what, store.Describe(), cred.ExpirationTimestamp.UTC().Format(time.RFC3339), left)
}
