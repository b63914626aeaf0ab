// Package identityrule is the one rule for the identities the agent hands
// out (TokenCredentialRequest's certificates and proxy tokens) and the ones
// its impersonation proxy asks the API server to impersonate.
//
// The proxy names a user to the API server in Impersonate-* headers, and a
// header is not a faithful carrier: HTTP/1.1 readers and writers trim
// leading and trailing spaces and tabs, transports refuse control
// characters, and the API server lowercases the name of an
// Impersonate-Extra- header, and so the extra's key. A group " system:masters"
// would pass a check for the "system:" prefix and reach the API server as
// system:masters. So every part of an identity must arrive byte for byte,
// and the system: checks run on exactly what the API server will see. A
// value that would change is refused, never cleaned up: a lookalike of
// another user's name is an attack, not a typo.
package identityrule

import (
	"net/textproto"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
)

// Rule is why a part of an identity is refused. It never holds the value.
type Rule string

// The rules, as they read after the part they refuse ("group is ...").
const (
	RuleEmpty     Rule = "is empty"
	RuleChanges   Rule = "would not reach the API server unchanged in a header (a leading or trailing space or tab, a control character, or invalid UTF-8)"
	RuleKeyCase   Rule = "has upper-case letters, which the API server lowercases in an impersonation header"
	RuleSystem    Rule = "is in the reserved system: namespace"
	RuleK8sDomain Rule = "is in a domain reserved for Kubernetes (kubernetes.io, k8s.io)"
	RuleProxyKey  Rule = "is reserved for the impersonation proxy's record of a nested impersonation"
)

// Parts of an identity, as errors name them.
const (
	PartUsername   = "username"
	PartUID        = "UID"
	PartGroup      = "group"
	PartExtraKey   = "extra key"
	PartExtraValue = "extra value"
)

// Error is a refused identity: which part, and by which rule. Its message
// never holds the value (identities are not logged unless asked); Value
// gives it to a caller that was asked to name it.
type Error struct {
	Part  string
	Rule  Rule
	value string
}

func (e *Error) Error() string { return e.Part + " " + string(e.Rule) }

// Value is the refused value (for an extra value, its key's value).
func (e *Error) Value() string { return e.value }

func refuse(part string, rule Rule, value string) error {
	return &Error{Part: part, Rule: rule, value: value}
}

// Unchanged reports whether v reaches the API server byte for byte as a
// header value, over HTTP/1.1 and HTTP/2 alike: no leading or trailing
// space or tab (HTTP/1.1 trims them), no control character but an inner
// tab (transports refuse them), and valid UTF-8 (what a JWT, a TokenReview
// or an audit log carries).
func Unchanged(v string) bool {
	return textproto.TrimString(v) == v && httpguts.ValidHeaderFieldValue(v) && utf8.ValidString(v)
}

// unchangedKey reports whether an extra's key survives as the name of an
// Impersonate-Extra- header: the proxy escapes every byte that may not
// stand in a header name, and the API server lowercases the name before it
// unescapes it, so only ASCII upper case changes.
func unchangedKey(k string) bool {
	if !utf8.ValidString(k) {
		return false
	}
	for i := range len(k) {
		if 'A' <= k[i] && k[i] <= 'Z' {
			return false
		}
	}
	return true
}

// Deliverable refuses an identity that the API server would not receive
// exactly as it is, were it impersonated: an empty username, or any part
// (username, UID, group, extra key or value) a header would change. It is
// the impersonation proxy's last check before it names a user upstream,
// whoever the user is (a certificate of the cluster's own CA may name
// system:masters, and that is the API server's to decide).
func Deliverable(u user.Info) error {
	if u == nil || u.GetName() == "" {
		return refuse(PartUsername, RuleEmpty, "")
	}
	return deliverable(u, "")
}

// deliverable checks every part; the values of the extra skip are not
// checked (the credential replaces them).
func deliverable(u user.Info, skip string) error {
	if !Unchanged(u.GetName()) {
		return refuse(PartUsername, RuleChanges, u.GetName())
	}
	if !Unchanged(u.GetUID()) {
		return refuse(PartUID, RuleChanges, u.GetUID())
	}
	for _, g := range u.GetGroups() {
		if !Unchanged(g) {
			return refuse(PartGroup, RuleChanges, g)
		}
	}
	for k, vs := range u.GetExtra() {
		switch {
		case k == "":
			return refuse(PartExtraKey, RuleEmpty, k)
		case !unchangedKey(k):
			return refuse(PartExtraKey, RuleKeyCase, k)
		case k == skip:
			continue
		}
		for _, v := range vs {
			if !Unchanged(v) {
				return refuse(PartExtraValue, RuleChanges, v)
			}
		}
	}
	return nil
}

// External refuses an identity that came from outside the cluster (an
// identity provider, a token webhook) and that no credential of the agent
// may carry: everything Deliverable refuses, and any username or group in
// system: (Kubernetes' own identities and system:masters), and any extra
// in Kubernetes' domains (bound pods, nodes: the API server's to assign)
// or the impersonation proxy's original-user key of any API group suffix.
// The credential ID extra is the exception: every credential replaces it
// with its own.
func External(u user.Info) error {
	if u == nil || u.GetName() == "" {
		return refuse(PartUsername, RuleEmpty, "")
	}
	// Reserved extra keys whatever their case (the API server lowercases
	// them), so the refusal names the reservation.
	for k := range u.GetExtra() {
		switch {
		case groupsuffix.IsOriginalUserExtra(k):
			return refuse(PartExtraKey, RuleProxyKey, k)
		case k != user.CredentialIDKey && kubernetesDomain(k):
			return refuse(PartExtraKey, RuleK8sDomain, k)
		}
	}
	// After this, each value is exactly what the API server will see, so
	// the prefix checks below see it too.
	if err := deliverable(u, user.CredentialIDKey); err != nil {
		return err
	}
	if reserved(u.GetName()) {
		return refuse(PartUsername, RuleSystem, u.GetName())
	}
	for _, g := range u.GetGroups() {
		if reserved(g) {
			return refuse(PartGroup, RuleSystem, g)
		}
	}
	return nil
}

// reserved: Kubernetes' own names (system:masters, system:nodes,
// system:kube-controller-manager, system:serviceaccount:...) start so.
func reserved(name string) bool { return strings.HasPrefix(name, "system:") }

// kubernetesDomain reports whether an extra key's domain (before the first
// "/") is kubernetes.io, k8s.io or a subdomain of either: the domains
// Kubernetes reserves for its own extras (as its structured authentication
// configuration does for claim mappings).
func kubernetesDomain(key string) bool {
	domain, _, ok := strings.Cut(strings.ToLower(key), "/")
	if !ok {
		return false
	}
	for _, d := range []string{"kubernetes.io", "k8s.io"} {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return true
		}
	}
	return false
}
