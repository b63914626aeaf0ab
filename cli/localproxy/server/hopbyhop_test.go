package server_test

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2/hpack"

	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/rawhttptest"

	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cli/localproxy/server"
	"github.com/pinniped-kit/pinniped/cli/localproxy/upstream"
)

// identityOf keeps the identity-carrying headers of a request the API
// server received, in any case or spelling, and a WebSocket subprotocol
// line with a bearer token in it (the API server reads one from there).
func identityOf(h http.Header) http.Header {
	out := http.Header{}
	for k, vs := range h {
		lk := strings.ReplaceAll(strings.ToLower(k), "_", "-")
		bearerProtocol := lk == "sec-websocket-protocol" && slices.ContainsFunc(vs, func(v string) bool {
			return strings.Contains(strings.ToLower(v), "base64url.bearer.authorization.k8s.io.")
		})
		if lk == "authorization" || lk == "proxy-authorization" || lk == "forwarded" || lk == "x-real-ip" || bearerProtocol ||
			strings.HasPrefix(lk, "impersonate-") || strings.HasPrefix(lk, "x-remote-") || strings.HasPrefix(lk, "x-forwarded-") {
			out[k] = vs
		}
	}
	return out
}

func sameIdentity(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// TestConnectionHeaderCannotChangeTheCredential: a client that names
// headers in Connection, or sends identity headers in any spelling, never
// reaches the API server with anything but the generation's credential.
// Raw HTTP/1.x through the real server and reverse proxy, for a certificate
// and for a token generation.
func TestConnectionHeaderCannotChangeTheCredential(t *testing.T) {
	api := newAPIServer(t)
	for _, tokenGen := range []bool{false, true} {
		p := newLocalProxy(t, api, nil)
		want, wantCN := http.Header{}, "alice"
		if tokenGen {
			p.holder.Swap(api.gen(t, credcache.Credential{Token: "gen-token"}, 1))
			want, wantCN = http.Header{"Authorization": {"Bearer gen-token"}}, ""
		} else {
			p.holder.Swap(api.certGen(t, "alice", 1))
		}
		addr := strings.TrimPrefix(p.URL, "https://")
		auth := "Authorization: Bearer " + secret + "\r\n"
		const refused, unauthorized, forwarded, malformed = 400, 401, 200, -1
		for _, c := range []struct {
			name    string
			proto   string
			headers string
			want    int
		}{
			{"Connection names Authorization", "HTTP/1.1", auth + "Connection: Authorization\r\n", refused},
			{"Connection names it in lower case", "HTTP/1.1", auth + "connection: keep-alive, authorization\r\n", refused},
			{"Connection names Impersonate-User", "HTTP/1.1", auth + "Connection: Impersonate-User\r\n", refused},
			{"upper case", "HTTP/1.1", auth + "CONNECTION: IMPERSONATE-USER, IMPERSONATE-GROUP\r\n", refused},
			{"odd spacing in the list", "HTTP/1.1", auth + "Connection: ,\t Impersonate-User \t,\r\n", refused},
			{"second Connection line", "HTTP/1.1", auth + "Connection: keep-alive\r\nConnection: X-Remote-User\r\n", refused},
			{"HTTP/1.0 naming Authorization", "HTTP/1.0", auth + "Connection: Authorization, keep-alive\r\n", refused},
			{"TE named in Connection", "HTTP/1.1", auth + "TE: trailers\r\nConnection: TE\r\n", refused},
			{"a WebSocket bearer subprotocol", "HTTP/1.1", auth + "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Protocol: v5.channel.k8s.io, base64url.bearer.authorization.k8s.io.eA\r\n", refused},
			{"space before the colon", "HTTP/1.1", auth + "Connection : Authorization\r\n", malformed},
			{"Connection names Authorization, no secret", "HTTP/1.1", "Connection: Authorization\r\n", unauthorized},
			{"a folded continuation line", "HTTP/1.1", "Authorization: Bearer " + secret + "\r\n x\r\n", unauthorized},
			{"plain", "HTTP/1.1", auth, forwarded},
			{"header name in lower case", "HTTP/1.1", "authorization: bearer " + secret + "\r\n", forwarded},
			{"trailing spaces", "HTTP/1.1", "Authorization: Bearer " + secret + "  \t \r\n", forwarded},
			{"HTTP/1.0", "HTTP/1.0", auth, forwarded},
			{"HTTP/1.0 keep-alive", "HTTP/1.0", auth + "Connection: keep-alive\r\n", forwarded},
			{"keep-alive", "HTTP/1.1", auth + "Connection: Keep-Alive\r\nKeep-Alive: timeout=5\r\n", forwarded},
			{"close", "HTTP/1.1", auth + "Connection: close\r\n", forwarded},
			{"Upgrade named without an upgrade", "HTTP/1.1", auth + "Connection: Upgrade\r\n", forwarded},
			{"Proxy-Connection naming Authorization", "HTTP/1.1", auth + "Proxy-Connection: Authorization\r\n", forwarded},
			{"Keep-Alive naming Authorization", "HTTP/1.1", auth + "Keep-Alive: Authorization\r\n", forwarded},
			{"identity headers in every spelling", "HTTP/1.1", auth + "X_Remote_User: admin\r\nX-Forwarded-For: 1.2.3.4\r\nForwarded: for=1.2.3.4\r\nX-Real-Ip: 1.2.3.4\r\nProxy-Authorization: Basic eA==\r\n", forwarded},
			// Impersonation (kubectl --as) is refused, never stripped and
			// sent as the proxy's user.
			{"Impersonate-User", "HTTP/1.1", auth + "Impersonate-User: admin\r\n", refused},
			{"impersonation in odd spellings", "HTTP/1.1", auth + "Impersonate_Group: system:masters\r\nimpersonate-user: root\r\nIMPERSONATE-UID: 0\r\n", refused},
			{"duplicated Impersonate-User", "HTTP/1.1", auth + "Impersonate-User: admin\r\nImpersonate-User: alice\r\n", refused},
			{"HTTP/1.0 Impersonate-Extra", "HTTP/1.0", auth + "Impersonate-Extra-Scopes: all\r\n", refused},
		} {
			t.Run(fmt.Sprintf("token=%v/%s", tokenGen, c.name), func(t *testing.T) {
				before := api.calls.Load()
				got := rawRequest(t, addr, "GET /ctx/"+slug+"/api/v1/namespaces "+c.proto+"\r\nHost: x\r\n"+c.headers+"\r\n")
				switch c.want {
				case malformed:
					// The HTTP server itself refuses these.
					if got != http.StatusBadRequest && got != 0 {
						t.Fatalf("status %d, want the server's 400", got)
					}
				default:
					if got != c.want {
						t.Fatalf("status %d, want %d", got, c.want)
					}
				}
				if c.want != forwarded {
					if api.calls.Load() != before {
						t.Fatal("the request reached the API server")
					}
					return
				}
				if api.calls.Load() != before+1 {
					t.Fatal("the request did not reach the API server")
				}
				seen := api.last(t)
				if id := identityOf(seen.Header); !sameIdentity(id, want) || seen.CN != wantCN {
					t.Fatalf("the API server saw identity headers %v and certificate %q, want exactly %v and %q", id, seen.CN, want, wantCN)
				}
			})
		}
	}
}

// TestHTTP2ConnectionHeaderIsRefused: HTTP/2 has no Connection header
// (RFC 9113 section 8.2.2); a client that sends one anyway, in raw frames,
// never reaches the API server.
func TestHTTP2ConnectionHeaderIsRefused(t *testing.T) {
	api := newAPIServer(t)
	p := newLocalProxy(t, api, nil)
	p.holder.Swap(api.certGen(t, "alice", 1))
	addr := strings.TrimPrefix(p.URL, "https://")
	auth := hpack.HeaderField{Name: "authorization", Value: "Bearer " + secret}
	for _, fields := range [][]hpack.HeaderField{
		{auth, {Name: "connection", Value: "authorization"}},
		{{Name: "connection", Value: "keep-alive, impersonate-user"}, auth},
		{auth, {Name: "te", Value: "trailers"}, {Name: "connection", Value: "te"}},
		{{Name: "Authorization", Value: "Bearer " + secret}}, // HTTP/2 field names are lower case
		{{Name: "authorization", Value: "Bearer wrong"}},
		{auth, {Name: "authorization", Value: "Bearer " + secret}},
	} {
		if code := rawhttptest.Get2(t, addr, "/ctx/"+slug+"/api", fields); code == http.StatusOK || api.calls.Load() != 0 {
			t.Fatalf("%v: status %d, upstream calls %d", fields, code, api.calls.Load())
		}
	}
	if code := rawhttptest.Get2(t, addr, "/ctx/"+slug+"/api", []hpack.HeaderField{auth, {Name: "impersonate-user", Value: "root"}}); code != http.StatusBadRequest || api.calls.Load() != 0 {
		t.Fatalf("HTTP/2 with impersonate-user: status %d, upstream calls %d, want 400 and none", code, api.calls.Load())
	}
	if code := rawhttptest.Get2(t, addr, "/ctx/"+slug+"/api", []hpack.HeaderField{auth, {Name: "x-remote-user", Value: "root"}, {Name: "x-forwarded-for", Value: "1.2.3.4"}}); code != http.StatusOK || api.calls.Load() != 1 {
		t.Fatalf("plain HTTP/2 request: status %d, upstream calls %d", code, api.calls.Load())
	}
	if seen := api.last(t); len(identityOf(seen.Header)) != 0 || seen.CN != "alice" {
		t.Fatalf("the HTTP/2 request reached the API server with %v as %q", identityOf(seen.Header), seen.CN)
	}
}

// FuzzProxySendsOnlyTheGenerationsCredential: for any request a client
// can send (any method, path, headers and HTTP/1.x version, parsed as the
// server parses it), a request that reaches the API server carries exactly
// the generation's credential (its certificate, or its token and no
// certificate), none of the client's identity headers, and never the local
// secret.
func FuzzProxySendsOnlyTheGenerationsCredential(f *testing.F) {
	for _, seed := range []string{
		"Connection: Authorization",
		"Connection: impersonate-user, IMPERSONATE-GROUP\nConnection: keep-alive",
		"Connection: ,Authorization,\nAuthorization: Bearer stolen",
		"Proxy-Connection: Authorization\nKeep-Alive: timeout=1, Authorization",
		"Upgrade: websocket\nConnection: Upgrade, Authorization",
		"Upgrade: websocket\nConnection: Upgrade\nSec-WebSocket-Protocol: v5.channel.k8s.io, base64url.bearer.authorization.k8s.io." + base64.RawURLEncoding.EncodeToString([]byte("stolen")),
		"TE: trailers\nConnection: TE",
		"X-Remote-User: admin\nX_Remote_Group: system:masters\nx-forwarded-for: 1.2.3.4\nForwarded: for=x\nX-Real-IP: x",
		"Impersonate-User: admin\nImpersonate-Group: system:masters\nImpersonate-Extra-Scopes: all\nImpersonate-Uid: 0",
		"Proxy-Authorization: Basic eA==",
		"Transfer-Encoding: chunked",
		"Content-Length: 0\nConnection: close",
		"authorization: Bearer stolen\nAUTHORIZATION: bearer x.y.z",
		" stolen",
		"",
	} {
		for _, tokenGen := range []bool{false, true} {
			f.Add("GET", "/ctx/"+slug+"/api/v1/pods", seed, false, tokenGen)
			f.Add("POST", "/ctx/"+slug+"/apis/x", seed, true, tokenGen)
			f.Add("GET", "/ctx/other/api", seed, false, tokenGen)
		}
	}
	api := newAPIServer(f)
	u, _ := url.Parse(api.URL)
	handlers := map[bool]http.Handler{}
	for _, tokenGen := range []bool{false, true} {
		h := &upstream.Holder{}
		if tokenGen {
			h.Swap(api.gen(f, credcache.Credential{Token: "gen-token"}, 1))
		} else {
			h.Swap(api.certGen(f, "alice", 1))
		}
		handlers[tokenGen] = server.New([]byte(secret), []*server.Target{{Context: ctx, Slug: slug, Upstream: u, Holder: h}},
			slog.New(slog.NewTextHandler(io.Discard, nil)))
	}
	var iteration atomic.Int64
	f.Fuzz(func(t *testing.T, method, path, headers string, http10, tokenGen bool) {
		// A request the proxy gave up on (a 502) may still reach the API
		// server after this iteration; each iteration counts only its own.
		id := fmt.Sprint(iteration.Add(1))
		want, wantCN := http.Header{}, "alice"
		if tokenGen {
			want, wantCN = http.Header{"Authorization": {"Bearer gen-token"}}, ""
		}
		proto := "HTTP/1.1"
		if http10 {
			proto = "HTTP/1.0"
		}
		var raw strings.Builder
		raw.WriteString(method + " " + path + " " + proto + "\r\nHost: x\r\nAuthorization: Bearer " + secret + "\r\nX-Fuzz-Iteration: " + id + "\r\n")
		for line := range strings.SplitSeq(headers, "\n") {
			raw.WriteString(strings.TrimSuffix(line, "\r") + "\r\n")
		}
		raw.WriteString("\r\n")
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw.String())))
		if err != nil {
			return // the server answers 400 itself; nothing reaches the proxy
		}
		req.RemoteAddr = "192.0.2.1:1234"
		rec := httptest.NewRecorder()
		handlers[tokenGen].ServeHTTP(rec, req)
		api.mu.Lock()
		var seen []seenRequest
		for _, s := range api.seen {
			// A fuzzed continuation line may fold more onto it.
			if slices.ContainsFunc(s.Header.Values("X-Fuzz-Iteration"), func(v string) bool { return v == id || strings.HasPrefix(v, id+" ") }) {
				seen = append(seen, s)
			}
		}
		api.seen = nil
		api.mu.Unlock()
		for _, s := range seen {
			if strings.Contains(fmt.Sprint(s.Header), secret) || strings.Contains(s.URI, secret) {
				t.Fatalf("request %q reached the API server with the local secret", raw.String())
			}
			if id := identityOf(s.Header); !sameIdentity(id, want) || s.CN != wantCN {
				t.Fatalf("request %q reached the API server with identity headers %v and certificate %q, want exactly %v and %q", raw.String(), id, s.CN, want, wantCN)
			}
		}
		// Every answer is the proxy's own decision (400, 401, 404), or the
		// API server's (sent once), or a request the API server could not
		// take (a body that is not there: 502). A 500 is the last check
		// catching an identity the proxy failed to strip: a bug, even
		// though nothing wrong was sent.
		switch rec.Code {
		case http.StatusOK:
			if len(seen) != 1 {
				t.Fatalf("request %q answered 200 without reaching the API server once (%d)", raw.String(), len(seen))
			}
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound, http.StatusBadGateway:
		default:
			t.Fatalf("request %q answered %d: %s", raw.String(), rec.Code, rec.Body.String())
		}
	})
}
