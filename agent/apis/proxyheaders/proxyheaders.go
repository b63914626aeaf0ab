// Package proxyheaders holds the header rules every pinniped proxy applies to
// what a client sends: the agent's impersonation proxy and the CLI's local
// credential proxy both speak for the user upstream, so both must drop every
// identity a client claims and refuse a Connection header that would have
// the reverse proxy delete headers of the proxy's choosing. One definition,
// so the two cannot drift apart. Standard library only: the CLI links it.
package proxyheaders

import (
	"net/http"
	"slices"
	"strings"
)

// identityPrefixes are headers a client could use to claim an identity or
// to mislead the API server about where a request came from.
var identityPrefixes = []string{"impersonate-", "x-remote-", "x-forwarded-"}

// StripIdentityHeaders removes every client-sent header that carries an
// identity, whatever its case: the proxy is the only one that speaks for the
// user upstream.
func StripIdentityHeaders(h http.Header) {
	for k := range h {
		if IsIdentityHeader(k) {
			delete(h, k)
		}
	}
}

// IsIdentityHeader reports whether a header name carries an identity, in
// any case, and with underscores read as dashes (some servers and proxies
// treat them alike).
func IsIdentityHeader(name string) bool {
	lk := strings.ReplaceAll(strings.ToLower(name), "_", "-")
	if lk == "authorization" || lk == "proxy-authorization" || lk == "forwarded" || lk == "x-real-ip" {
		return true
	}
	for _, p := range identityPrefixes {
		if strings.HasPrefix(lk, p) {
			return true
		}
	}
	return false
}

// ImpersonationRequested returns the name of the first Impersonate-*
// header, in any case and with underscores read as dashes: a client asking
// to act as someone else (kubectl --as, --as-group, --as-uid).
func ImpersonationRequested(h http.Header) (string, bool) {
	for k := range h {
		if strings.HasPrefix(strings.ReplaceAll(strings.ToLower(k), "_", "-"), "impersonate-") {
			return k, true
		}
	}
	return "", false
}

// allowedConnectionTokens are the only Connection tokens a client may send.
// Every other token names a header for the next hop to delete: the reverse
// proxy obeys such a token, and a client that names Impersonate-User would
// otherwise have a say in which identity headers reach the API server.
var allowedConnectionTokens = []string{"upgrade", "close", "keep-alive"}

// HopByHopProblem returns the first Connection token that is not allowed.
// Every Connection line counts, and each may be a comma-separated list
// (RFC 9110 section 7.6.1); empty list elements are allowed there.
func HopByHopProblem(h http.Header) (string, bool) {
	for k, lines := range h {
		if !strings.EqualFold(k, "Connection") {
			continue
		}
		for _, line := range lines {
			for token := range strings.SplitSeq(line, ",") {
				token = strings.ToLower(strings.Trim(token, " \t"))
				if token != "" && !slices.Contains(allowedConnectionTokens, token) {
					return token, true
				}
			}
		}
	}
	return "", false
}

// WebSocketBearerPrefix marks a WebSocket subprotocol that carries a bearer
// token (browsers cannot set Authorization on a WebSocket). The API server
// hands such a token to its token authenticators, webhooks included.
const WebSocketBearerPrefix = "base64url.bearer.authorization.k8s.io." //nolint:gosec // a protocol prefix, not a credential

// WebSocketBearer reports whether any Sec-WebSocket-Protocol entry, in any
// header line or case, carries a bearer token: an identity a client can send
// outside the identity headers.
func WebSocketBearer(h http.Header) bool {
	return len(WebSocketBearers(h)) > 0
}

// WebSocketBearers returns the still-encoded tokens (what follows
// WebSocketBearerPrefix) of every Sec-WebSocket-Protocol entry, in any
// header line or case, that carries one.
func WebSocketBearers(h http.Header) []string {
	var out []string
	for k, lines := range h {
		if !strings.EqualFold(k, "Sec-WebSocket-Protocol") {
			continue
		}
		for _, line := range lines {
			for proto := range strings.SplitSeq(line, ",") {
				proto = strings.TrimSpace(proto)
				if len(proto) >= len(WebSocketBearerPrefix) && strings.EqualFold(proto[:len(WebSocketBearerPrefix)], WebSocketBearerPrefix) {
					out = append(out, proto[len(WebSocketBearerPrefix):])
				}
			}
		}
	}
	return out
}
