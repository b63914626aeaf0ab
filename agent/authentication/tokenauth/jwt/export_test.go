package jwt

import (
	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/claimrules"
)

// NewWithKeySet is New without discovery, for tests that hold the keys
// themselves (the differential test against kube-apiserver's authenticator).
func NewWithKeySet(cfg Config, keySet oidc.KeySet) (*Authenticator, error) {
	rules, err := claimrules.Compile(cfg.Spec)
	if err != nil {
		return nil, stepErr(CondClaimRulesValid, err)
	}
	return newAuthenticator(cfg, rules, keySet), nil
}
