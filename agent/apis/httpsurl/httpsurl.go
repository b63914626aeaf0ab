// Package httpsurl is the one check that a URL a token or a credential is
// sent to is https, shared by the CLI and the agent like the rest of the
// wire contract: issuers, agent endpoints, webhooks, discovery endpoints.
// Standard library only: the CLI's lean front links it.
package httpsurl

import (
	"errors"
	"fmt"
	"net/url"
)

// ErrNotHTTPS is wrapped by Check's error for a URL of another scheme.
var ErrNotHTTPS = errors.New("must be an https URL: what is sent there must not cross the network in clear text")

// Check reports whether raw is an https URL with a host; what names it in
// the error (a flag, a field, an endpoint of a discovery document).
func Check(what, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%s %q is not a URL", what, raw)
	}
	if u.Scheme != "https" {
		return fmt.Errorf("%s %q %w", what, raw, ErrNotHTTPS)
	}
	return nil
}
