// Package groupsuffix owns the one naming rule behind upstream Pinniped's
// api_group_suffix: every API group of the agent is <prefix>.concierge.<suffix>,
// and every name derived from a group (APIService names, the impersonation
// proxy's extra key) follows from it. The agent, the installer and the CLI
// all ask this package, so the rule is written once.
//
// It uses only the standard library, and no regexp: the CLI's lean front
// (the cached kubectl login) imports it, and pays for every package it links.
package groupsuffix

import (
	"errors"
	"fmt"
	"strings"
)

// Default is the suffix of every group when none is chosen; clients and
// kubeconfigs that never heard of suffixes expect it.
const Default = "pinniped.dev"

// Version is the one version every group serves.
const Version = "v1alpha1"

// Group prefixes: the part of a group name before ".concierge.".
const (
	Login          = "login"          // TokenCredentialRequest (aggregated)
	Identity       = "identity"       // WhoAmIRequest (aggregated)
	Authentication = "authentication" // JWTAuthenticator, WebhookAuthenticator (CRDs)
	Config         = "config"         // CredentialIssuer (CRD)
)

// longestDerived is the longest name built on a suffix, the CRD
// "webhookauthenticators.authentication.concierge.<suffix>"; it must
// stay a valid DNS subdomain too.
const longestDerived = "webhookauthenticators." + Authentication + ".concierge."

// maxSubdomain is the longest DNS-1123 subdomain.
const maxSubdomain = 253

// OrDefault is suffix, or Default when it is empty.
func OrDefault(suffix string) string {
	if suffix == "" {
		return Default
	}
	return suffix
}

// IsDefault reports whether suffix means the default spelling.
func IsDefault(suffix string) bool { return OrDefault(suffix) == Default }

// Group is the API group with the given prefix (Login, Identity,
// Authentication, Config) under suffix ("" means Default).
func Group(prefix, suffix string) string {
	return prefix + ".concierge." + OrDefault(suffix)
}

// GroupVersion is Group's "group/version", as in an object's apiVersion.
func GroupVersion(prefix, suffix string) string {
	return Group(prefix, suffix) + "/" + Version
}

// APIServiceName is the name of the APIService that registers group.
func APIServiceName(prefix, suffix string) string {
	return Version + "." + Group(prefix, suffix)
}

// APIServiceNames are the agent's two aggregated APIs, login first.
func APIServiceNames(suffix string) []string {
	return []string{APIServiceName(Login, suffix), APIServiceName(Identity, suffix)}
}

// OriginalUserExtra is the user extra in which the impersonation proxy
// records who asked for a nested impersonation. Upstream renames it with
// the suffix, so each Concierge reserves only its own key.
func OriginalUserExtra(suffix string) string {
	return originalUserExtraPrefix + OrDefault(suffix)
}

const originalUserExtraPrefix = "original-user-info.impersonation-proxy.concierge."

// IsOriginalUserExtra says whether key is the original-user extra of any
// API group suffix, in any case: only an impersonation proxy may set one,
// so no client or authenticator can forge what another install's audit
// tooling reads.
func IsOriginalUserExtra(key string) bool {
	return strings.HasPrefix(strings.ToLower(key), originalUserExtraPrefix)
}

// Validate says whether suffix can be used: a DNS-1123 subdomain with at
// least one dot (as upstream requires), short enough that every name built
// on it is one too. Empty is not valid; callers mean Default then and
// should say so.
func Validate(suffix string) error {
	if suffix == "" {
		return fmt.Errorf("the API group suffix is empty: leave the flag out for the default %s", Default)
	}
	if err := subdomain(suffix); err != nil {
		return fmt.Errorf("API group suffix %q: %w", suffix, err)
	}
	if !strings.Contains(suffix, ".") {
		return fmt.Errorf("API group suffix %q must contain a dot, like a domain you own (example.com)", suffix)
	}
	if n := len(longestDerived) + len(suffix); n > maxSubdomain {
		return fmt.Errorf("API group suffix %q is too long: the CRD name %s<suffix> would be %d characters, over %d; use at most %d",
			suffix, longestDerived, n, maxSubdomain, maxSubdomain-len(longestDerived))
	}
	return nil
}

// subdomain checks RFC 1123 subdomain syntax: lowercase letters, digits,
// '-' and '.', each dot-separated part starting and ending with a letter or
// digit.
func subdomain(s string) error {
	if len(s) > maxSubdomain {
		return fmt.Errorf("longer than %d characters", maxSubdomain)
	}
	for _, part := range strings.Split(s, ".") {
		if part == "" {
			return errors.New("empty part between dots: use a domain name such as example.com")
		}
		for i := 0; i < len(part); i++ {
			c := part[i]
			switch {
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			case c == '-' && i > 0 && i < len(part)-1:
			case c == '-':
				return fmt.Errorf("part %q starts or ends with '-': parts must begin and end with a lowercase letter or digit", part)
			default:
				return fmt.Errorf("character %q is not allowed: use lowercase letters, digits, '-' and '.'", c)
			}
		}
	}
	return nil
}
