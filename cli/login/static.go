package login

import (
	"context"

	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/execcred"
)

// LoginStatic prints a credential for a static token: the token itself, or
// the cluster credential the agent trades it for (cached until it expires).
func (e *Engine) LoginStatic(ctx context.Context, c *config.Static, exec *execcred.Request) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.Concierge == nil {
		// Nothing to cache: the token is the credential, valid as long as
		// whoever issued it says.
		return execcred.Write(e.Stdout, exec.APIVersion, execcred.Status{Token: c.Token})
	}
	key := c.CredentialKey(exec.KeyCluster())
	creds := e.credCache()
	hit, ok, err := e.cached(ctx, creds, key)
	if err != nil {
		return err
	}
	if ok {
		return e.write(exec, hit)
	}
	unlock, err := e.lock(ctx, key, false)
	if err != nil {
		return err
	}
	defer unlock()
	hit, ok, err = e.cached(ctx, creds, key)
	if err != nil {
		return err
	}
	if ok {
		return e.write(exec, hit)
	}
	cc, err := e.Exchange(ctx, c.Concierge, c.Token)
	if err != nil {
		return err
	}
	cred := &credcache.Credential{Token: cc.Token, ClientCertificateData: cc.ClientCertificateData, ClientKeyData: cc.ClientKeyData, ExpirationTimestamp: cc.ExpirationTimestamp.Time}
	if creds != nil {
		if err := creds.Put(ctx, key, "static token via "+c.Concierge.Endpoint, *cred); err != nil {
			e.UI.Warn("could not cache the credential ("+err.Error()+")", "the next kubectl call will ask the agent again")
		}
	}
	return e.write(exec, cred)
}
