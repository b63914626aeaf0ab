package login

import (
	"context"
	"errors"

	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cli/conciergeclient"
	"github.com/pinniped-kit/pinniped/cli/credkey"
	"github.com/pinniped-kit/pinniped/cli/execcred"
)

// LoginStatic prints a credential for a static token: the token itself, or
// the cluster credential the agent trades it for (cached until it expires).
// key are its cache-key inputs (loginflags.Static.KeyInputs).
func (e *Engine) LoginStatic(ctx context.Context, token string, key credkey.Inputs, concierge *conciergeclient.Config, exec *execcred.Request) error {
	if token == "" {
		return errors.New("no token: pass --token, or --token-env naming a set environment variable")
	}
	if concierge == nil {
		// Nothing to cache: the token is the credential, valid as long as
		// whoever issued it says.
		return execcred.Write(e.Stdout, exec.APIVersion, execcred.Status{Token: token})
	}
	creds := e.credCache()
	k := credentialKey(key, exec)
	if cred, ok := e.cached(ctx, creds, k); ok {
		return e.write(exec, cred)
	}
	unlock, err := e.lock(ctx, k, false)
	if err != nil {
		return err
	}
	defer unlock()
	if cred, ok := e.cached(ctx, creds, k); ok {
		return e.write(exec, cred)
	}
	cc, err := e.Exchange(ctx, concierge, token)
	if err != nil {
		return err
	}
	cred := &credcache.Credential{Token: cc.Token, ClientCertificateData: cc.ClientCertificateData, ClientKeyData: cc.ClientKeyData, ExpirationTimestamp: cc.ExpirationTimestamp.Time}
	if creds != nil {
		if err := creds.Put(ctx, k, "static token via "+concierge.Endpoint, *cred); err != nil {
			e.UI.Progress("could not cache the credential: " + err.Error())
		}
	}
	return e.write(exec, cred)
}
