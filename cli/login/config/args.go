package config

import (
	"encoding/base64"
	"strconv"
	"strings"
)

// Args are the arguments of `pinniped` that log in this way, as `pinniped
// get kubeconfig` writes them into a kubeconfig's exec entry; the flags
// read them back into an equal OIDC (the environment's Username and
// Password aside). The order is upstream Pinniped's.
func (c *OIDC) Args() []string {
	args := append([]string{"login", "oidc"}, c.Concierge.args()...)
	if c.CredentialCache != "" {
		args = append(args, "--credential-cache="+c.CredentialCache)
	}
	args = append(args, "--issuer="+c.Issuer, "--client-id="+c.ClientID, "--scopes="+strings.Join(c.Scopes, ","))
	if c.ClientSecret != "" {
		args = append(args, "--client-secret="+c.ClientSecret)
	}
	for _, p := range c.AuthorizeParams {
		args = append(args, "--authorize-param="+p)
	}
	if c.PresentToken != "" && c.PresentToken != PresentID {
		args = append(args, "--present-token="+c.PresentToken)
	}
	if len(c.CABundle) > 0 {
		args = append(args, "--ca-bundle-data="+base64.StdEncoding.EncodeToString(c.CABundle))
	}
	if c.RequestAudience != "" {
		args = append(args, "--request-audience="+c.RequestAudience)
	}
	if c.SkipBrowser {
		args = append(args, "--skip-browser")
	}
	if c.ListenPort != 0 {
		args = append(args, "--listen-port="+strconv.Itoa(c.ListenPort))
	}
	if c.Flow != FlowAuto {
		args = append(args, "--flow="+string(c.Flow))
	}
	if c.SkipListen {
		args = append(args, "--skip-listen")
	}
	if c.SessionCache != "" {
		args = append(args, "--session-cache="+c.SessionCache)
	}
	if c.Upstream.Name != "" {
		args = append(args, "--upstream-identity-provider-name="+c.Upstream.Name)
	}
	if c.Upstream.Type != "" {
		args = append(args, "--upstream-identity-provider-type="+c.Upstream.Type)
	}
	if c.Upstream.Flow != "" {
		args = append(args, "--upstream-identity-provider-flow="+c.Upstream.Flow)
	}
	return args
}

// Args are the arguments of this static login. With TokenEnv they name
// the variable, never the token: a kubeconfig is readable by whoever can
// read the file.
func (c *Static) Args() []string {
	args := append([]string{"login", "static"}, c.Concierge.args()...)
	if c.CredentialCache != "" {
		args = append(args, "--credential-cache="+c.CredentialCache)
	}
	if c.TokenEnv != "" {
		return append(args, "--token-env="+c.TokenEnv)
	}
	return append(args, "--token="+c.Token)
}

func (c *Concierge) args() []string {
	if c == nil {
		return nil
	}
	return []string{
		"--enable-concierge",
		"--concierge-api-group-suffix=" + c.Suffix(),
		"--concierge-authenticator-name=" + c.AuthenticatorName,
		"--concierge-authenticator-type=" + c.AuthenticatorType,
		"--concierge-endpoint=" + c.Endpoint,
		"--concierge-ca-bundle-data=" + base64.StdEncoding.EncodeToString(c.CABundle),
	}
}
