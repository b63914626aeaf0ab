package login

import (
	"context"

	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/execcred"
)

// LoginStatic prints a credential for a static token: the token itself, or
// the cluster credential the agent trades it for (cached until it expires).
func (r *Runner) LoginStatic(ctx context.Context, c *config.Static, exec *execcred.Request) error {
	cred, err := r.CredentialStatic(ctx, c, requestOf(exec))
	if err != nil {
		return err
	}
	if c.Concierge == nil {
		// The token itself: kubectl is told no expiry, as its issuer
		// told us none.
		return execcred.Write(r.Stdout, exec.APIVersion, execcred.Status{Token: cred.Token})
	}
	return r.write(exec, cred)
}

// CredentialStatic is the credential LoginStatic prints, for callers in
// this process (pinniped proxy). Without the agent it is the token itself,
// with a zero ExpirationTimestamp: valid as long as whoever issued it says.
func (r *Runner) CredentialStatic(ctx context.Context, c *config.Static, req Request) (*credcache.Credential, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Concierge == nil {
		// Nothing to cache: the token is the credential.
		return &credcache.Credential{Token: c.Token}, nil
	}
	key := c.CredentialKey(req.Cluster)
	creds := r.credCache(req)
	// Nobody types anything for a static token, so the other login holding
	// the lock is never waiting for a person.
	req.Interactive = false
	hit, unlock, err := r.cachedOrLock(ctx, creds, key, "", req)
	if err != nil || hit != nil {
		return hit, err
	}
	defer unlock()
	cc, err := r.Exchange(ctx, c.Concierge, c.Token)
	if err != nil {
		return nil, err
	}
	cred := &credcache.Credential{Token: cc.Token, ClientCertificateData: cc.ClientCertificateData, ClientKeyData: cc.ClientKeyData, ExpirationTimestamp: cc.ExpirationTimestamp.Time}
	r.store(ctx, creds, key, "static token via "+c.Concierge.Endpoint, "", cred, "the next kubectl call will ask the agent again")
	return cred, nil
}
