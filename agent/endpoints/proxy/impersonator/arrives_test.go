package impersonator_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/filters"
	kubeimpersonation "k8s.io/apiserver/pkg/endpoints/filters/impersonation"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/rest"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/agent/authentication/identityrule"
	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/impersonator"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/proxytoken"
)

// seen is an identity as the API server holds it after authentication and
// impersonation: what its audit log and authorizers see.
type seen struct {
	Name   string              `json:"name"`
	UID    string              `json:"uid"`
	Groups []string            `json:"groups"`
	Extra  map[string][]string `json:"extra"`
	Proto  int                 `json:"proto,omitempty"`
}

// normal is the part of an identity both sides must agree on: groups as a
// set with system:authenticated (every authenticated user has it, added by
// the API server wherever it was not sent), no credential ID (each
// credential names itself) and no extra without values (no header carries
// one, and kube-apiserver's own authenticators drop them).
func normal(name, uid string, groups []string, extra map[string][]string) seen {
	g := slices.Clone(groups)
	if !slices.Contains(g, user.AllAuthenticated) {
		g = append(g, user.AllAuthenticated)
	}
	slices.Sort(g)
	g = slices.Compact(g)
	e := map[string][]string{}
	for k, vs := range extra {
		// The proxy's record of who asked for a nested impersonation is
		// its own addition, checked by its own tests.
		if k != user.CredentialIDKey && k != impersonator.OriginalUserExtra && len(vs) > 0 {
			e[k] = vs
		}
	}
	return seen{Name: name, UID: uid, Groups: g, Extra: e}
}

func (s seen) same(o seen) bool {
	return s.Name == o.Name && s.UID == o.UID && slices.Equal(s.Groups, o.Groups) &&
		maps.EqualFunc(s.Extra, o.Extra, func(a, b []string) bool { return slices.Equal(a, b) })
}

// apiServer is an upstream that reads impersonation exactly as
// kube-apiserver does (k8s.io/apiserver's own filter, behind Go's HTTP/1.1
// and HTTP/2 servers) and answers with whom it would serve. constrained
// picks the filter of Kubernetes 1.36 and later, where constrained
// impersonation is on by default; the legacy one otherwise.
func apiServer(t testing.TB, constrained bool) *httptest.Server {
	t.Helper()
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := request.UserFrom(r.Context())
		_ = json.NewEncoder(w).Encode(seen{Name: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: u.GetExtra(), Proto: r.ProtoMajor})
	})
	codecs := serializer.NewCodecFactory(runtime.NewScheme()).WithoutConversion()
	var impersonation http.Handler
	if constrained {
		// Its authorization checks name the request's verb and resource,
		// so it needs the request's info, as in kube-apiserver's chain.
		impersonation = filters.WithRequestInfo(kubeimpersonation.WithConstrainedImpersonation(echo, proxyRBAC{}, codecs),
			&request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")})
	} else {
		impersonation = kubeimpersonation.WithImpersonation(echo, proxyRBAC{}, codecs)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The proxy's own ServiceAccount, authenticated by its token; any
		// other bearer token is a client's own, forwarded as it came.
		var who user.Info
		switch auth := r.Header.Values("Authorization"); {
		case len(auth) != 1 || !strings.HasPrefix(auth[0], "Bearer "):
			// Not 401: sendTo takes that for the proxy's own refusal,
			// and a request the proxy sent without its credential is
			// a failure of the test.
			http.Error(w, "the fake API server got no bearer token", http.StatusInternalServerError)
			return
		case auth[0] == "Bearer "+impersonatorToken:
			who = &user.DefaultInfo{Name: "system:serviceaccount:pinniped:impersonation-proxy", Groups: []string{user.AllAuthenticated}}
		default:
			who = &user.DefaultInfo{Name: "someone-else", Groups: []string{user.AllAuthenticated}}
		}
		impersonation.ServeHTTP(w, r.WithContext(request.WithUser(r.Context(), who)))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// proxyRBAC authorizes the proxy's ServiceAccount as its install does:
// the legacy verb `impersonate` on users, groups, UIDs and extras, and
// every request; none of constrained impersonation's verbs
// (impersonate:<mode>, impersonate-on:<mode>:<verb>), so a 1.36+ API
// server falls back to legacy impersonation for it, as on a real cluster.
// (Allowing those would run the filter's node and ServiceAccount modes,
// which add groups no real proxy gets.)
type proxyRBAC struct{}

func (proxyRBAC) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if v := a.GetVerb(); strings.HasPrefix(v, "impersonate:") || strings.HasPrefix(v, "impersonate-on:") {
		return authorizer.DecisionNoOpinion, "", nil
	}
	return authorizer.DecisionAllow, "", nil
}

// arrivalBed is the proxy in front of apiServer over the agent's own
// transports (NewTransports: HTTP/1.1 for reads, HTTP/2 for watches and
// writes, HTTP/1.1 for upgrades) with the impersonation ServiceAccount's token;
// certificates of ca and tokens of key accepted.
type arrivalBed struct {
	proxy *impersonator.Proxy
	ca    *certauthority.CA
	key   *proxytoken.Key
	// asking is a proxy whose authorizer allows every nested impersonation
	// and which forwards other bearer tokens directly; alice is a token of
	// its that authenticates alice.
	asking *impersonator.Proxy
	alice  string
}

func newArrivalBed(t testing.TB, constrained bool) *arrivalBed {
	t.Helper()
	srv := apiServer(t, constrained)
	tr, err := impersonator.NewTransports(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := certauthority.New("proxy signer", 24*time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	cas := &impersonator.ClientCAs{}
	cas.Set(ca.CertPEM())
	key := newKey(t)
	tokens := &impersonator.ProxyTokens{}
	tokens.Set(keySet(key), testAudience)
	up, _ := url.Parse(srv.URL)
	p := &impersonator.Proxy{Upstream: up, Transport: tr.Impersonating, UpgradeTransport: tr.ImpersonatingUpgrade, ImpersonatorToken: &fakeImpersonatorToken{},
		Authn: impersonator.NewCertAuthenticator(cas), ProxyTokens: tokens, Authz: policy{allow: false},
		Log: slog.New(slog.DiscardHandler)}
	p.Init()
	asking := &impersonator.Proxy{Upstream: up, Transport: tr.Impersonating, UpgradeTransport: tr.ImpersonatingUpgrade, ImpersonatorToken: &fakeImpersonatorToken{},
		DirectTransport: tr.Direct, DirectUpgradeTransport: tr.DirectUpgrade,
		Authn: noCert{}, ProxyTokens: tokens, Tokens: acceptAnyToken{&atomic.Int64{}}, Authz: policy{allow: true},
		Log: slog.New(slog.DiscardHandler)}
	asking.Init()
	alice, _ := signFor(t, key, testAudience, "alice", 7*24*time.Hour, time.Now())
	return &arrivalBed{proxy: p, ca: ca, key: key, asking: asking, alice: alice}
}

// ask sends a client's own impersonation request (kubectl --as) for u to
// the asking proxy, its Impersonate-* values as they would reach the proxy
// over HTTP/2 (which keeps spaces a HTTP/1.1 reader trims): nested, as
// alice with her proxy token, or direct, with someone else's bearer token.
func (b *arrivalBed) ask(t testing.TB, u user.Info, nested bool, via hop) (seen, error) {
	t.Helper()
	h := http.Header{"Impersonate-User": {u.GetName()}}
	if u.GetUID() != "" {
		h["Impersonate-Uid"] = []string{u.GetUID()}
	}
	if len(u.GetGroups()) > 0 {
		h["Impersonate-Group"] = u.GetGroups()
	}
	for k, vs := range u.GetExtra() {
		h["Impersonate-Extra-"+impersonator.ExtraHeaderKey(k)] = vs
	}
	token := "someone-elses-token"
	if nested {
		token = b.alice
	}
	return b.sendTo(t, b.asking, nil, token, via, h)
}

// hop is how a request goes from the proxy to the API server.
type hop uint8

const (
	// hopRequest is a read that ends soon (the bed's requests are GETs):
	// HTTP/1.1, whose reader trims the spaces around a header value.
	hopRequest hop = iota
	// hopWatch is a watch: HTTP/2, which keeps them.
	hopWatch
	// hopUpgrade is an exec, attach or port-forward upgrade: HTTP/1.1.
	hopUpgrade
)

var hops = []hop{hopRequest, hopWatch, hopUpgrade}

func (h hop) String() string { return [...]string{"request", "watch", "upgrade"}[h] }

// errRefused: the proxy answered 401 or 403, a refusal.
var errRefused = errors.New("refused")

// send asks the proxy whom the API server sees, with a client certificate
// (cert) or a bearer token, over the upstream hop via.
func (b *arrivalBed) send(t testing.TB, cert *x509.Certificate, token string, via hop) (seen, error) {
	t.Helper()
	return b.sendTo(t, b.proxy, cert, token, via, nil)
}

func (b *arrivalBed) sendTo(t testing.TB, p *impersonator.Proxy, cert *x509.Certificate, token string, via hop, h http.Header) (seen, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	target := "https://proxy/apis/authentication.k8s.io/v1/selfsubjectreviews"
	if via == hopWatch {
		target += "?watch=1"
	}
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	r.RemoteAddr = "192.0.2.1:1234"
	if cert != nil {
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	if via == hopUpgrade {
		r.Header.Set("Connection", "Upgrade")
		r.Header.Set("Upgrade", "websocket")
	}
	for k, vs := range h {
		r.Header[k] = vs
	}
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, r)
	switch rec.Code {
	case http.StatusOK:
	case http.StatusUnauthorized, http.StatusForbidden:
		return seen{}, errRefused
	default:
		t.Fatalf("the proxy answered %d (cert %v, %v): %s", rec.Code, cert != nil, via, rec.Body)
	}
	var s seen
	if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if want := map[hop]int{hopRequest: 1, hopWatch: 2, hopUpgrade: 1}[via]; s.Proto != want {
		t.Fatalf("upstream hop of a %v was HTTP/%d, want HTTP/%d", via, s.Proto, want)
	}
	return normal(s.Name, s.UID, s.Groups, s.Extra), nil
}

// certFor issues a certificate of the bed's CA naming u, and reads it back
// as kube-apiserver would, given it directly; false when the CA cannot
// encode u (the exchange then fails).
func (b *arrivalBed) certFor(t testing.TB, u user.Info) (*x509.Certificate, bool) {
	t.Helper()
	issued, err := b.ca.IssueClientCert(u.GetName(), u.GetUID(), u.GetGroups(), time.Hour)
	if err != nil {
		return nil, false
	}
	pair, err := tls.X509KeyPair(issued.CertPEM, issued.KeyPEM)
	if err != nil {
		return nil, false
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, false
	}
	return leaf, true
}

// arrivalSeeds are the identities the security review found and their
// neighbours: every whitespace, case, Unicode-space and system: variant,
// commas, control characters and long values.
var arrivalSeeds = []struct{ name, uid, groups, extraKey, extraValue string }{
	{"alice", "", "admins", "", ""},
	{"alice", "1234", "admins\ndevs", "example.com/tenant", "acme"},
	{"alice", "", " system:masters", "", ""},
	{"alice", "", "system:masters ", "", ""},
	{"alice", "", "\tsystem:masters", "", ""},
	{"alice", "", "system:masters\t", "", ""},
	{"alice", "", "system:masters", "", ""},
	{"alice", "", "System:masters", "", ""},
	{"alice", "", "SYSTEM:MASTERS", "", ""},
	{"alice", "", "\u00a0system:masters", "", ""},
	{"alice", "", "system:masters\u00a0", "", ""},
	{"alice", "", "\u3000system:masters", "", ""},
	{"alice", "", "\u200bsystem:masters", "", ""},
	{"alice", "", "system :masters", "", ""},
	{"alice", "", "system:", "", ""},
	{"alice", "", "systems:masters", "", ""},
	{"alice", "", "admins, system:masters", "", ""},
	{"alice", "", "a,b", "", ""},
	{"alice", "", "admins ", "", ""},
	{"alice", "", " admins", "", ""},
	{"alice", "", "adm\tins", "", ""},
	{"alice", "", "admins\x00", "", ""},
	{"alice", "", "adm\x7fins", "", ""},
	{"alice", "", "adm\x01ins", "", ""},
	{"alice", "", "adm\rins", "", ""},
	{"alice", "", "\xffadmins", "", ""},
	{"alice", "", strings.Repeat("g", 4096), "", ""},
	{"alice", "", "", "", ""},
	{" system:kube-controller-manager", "", "", "", ""},
	{"system:kube-controller-manager ", "", "", "", ""},
	{"system:admin", "", "", "", ""},
	{"System:admin", "", "", "", ""},
	{"alice ", "", "admins", "", ""},
	{" alice", "", "admins", "", ""},
	{"\talice", "", "", "", ""},
	{"al ice", "", "", "", ""},
	{"alice\u00a0", "", "", "", ""},
	{strings.Repeat("a", 4096), "", "", "", ""},
	{"alice", " 1234", "", "", ""},
	{"alice", "1234 ", "", "", ""},
	{"alice", "12\t34", "", "", ""},
	{"alice", "", "", "example.com/tenant", " acme"},
	{"alice", "", "", "example.com/tenant", "acme "},
	{"alice", "", "", "example.com/tenant", "a, b"},
	{"alice", "", "", "Example.com/Tenant", "acme"},
	{"alice", "", "", "example.com/ten ant", "acme"},
	{"alice", "", "", "example.com/tenant%41", "acme"},
	{"alice", "", "", "kubernetes.io/node-name", "n1"},
	{"alice", "", "", "authentication.kubernetes.io/credential-id", "JTI=forged"},
	{"alice", "", "", "original-user-info.impersonation-proxy.concierge.pinniped.dev", "{}"},
	{"alice", "", "", "example.com/tenant", ""},
	// Names constrained impersonation (1.36+) has modes of its own for,
	// which it must not take for a proxy that has only the legacy verb.
	{"system:node:n1", "", "", "", ""},
	{"system:node:n1", "", "admins", "", ""},
	{"system:serviceaccount:default:builder", "", "admins", "", ""},
}

// FuzzIdentityArrivesAsIssued is the identity rule's differential test at
// the unit level. The oracle is the identity the authenticator produced,
// which is what kube-apiserver decides when given the same token
// directly. Through each way into the proxy (a certificate the exchange
// would issue, a certificate of any trusted CA, a proxy token), and over
// each upstream hop (HTTP/1.1 for requests and upgrades, which trims;
// HTTP/2 for watches), the API
// server sees exactly that identity, or the user is refused. A user the
// rule accepts must get through.
func FuzzIdentityArrivesAsIssued(f *testing.F) {
	for _, s := range arrivalSeeds {
		for _, via := range hops {
			f.Add(s.name, s.uid, s.groups, s.extraKey, s.extraValue, uint8(via))
		}
	}
	beds := []*arrivalBed{newArrivalBed(f, false), newArrivalBed(f, true)}
	f.Fuzz(func(t *testing.T, name, uid, groups, extraKey, extraValue string, via uint8) {
		for _, bed := range beds {
			arrivesAsIssued(t, bed, name, uid, groups, extraKey, extraValue, hops[int(via)%len(hops)])
		}
	})
}

func arrivesAsIssued(t *testing.T, bed *arrivalBed, name, uid, groups, extraKey, extraValue string, via hop) {
	t.Helper()
	u := &user.DefaultInfo{Name: name, UID: uid}
	if groups != "" {
		u.Groups = strings.Split(groups, "\n")
	}
	if extraKey != "" || extraValue != "" {
		u.Extra = map[string][]string{extraKey: {extraValue}}
	}
	direct := normal(u.Name, u.UID, u.Groups, u.Extra)
	accepted := identityrule.External(u) == nil

	// What the exchange hands out: a proxy token, signed only for a
	// user the rule accepts, as clustercred.Token does.
	if proxytoken.CheckUser(u) == nil {
		tok, _, _, err := proxytoken.Sign(bed.key, testAudience, u, time.Hour, time.Now())
		if err == nil {
			got, err := bed.send(t, nil, tok, via)
			if err != nil || !got.same(direct) {
				t.Fatalf("proxy token for %#v: the API server saw %#v (%v), directly %#v", u, got, err, direct)
			}
		}
	}
	// A token whose signer skipped the rule (an older agent, a bug):
	// the proxy refuses it or delivers what it carries unchanged (its
	// JSON has made invalid UTF-8 into U+FFFD).
	if tok, _, _, err := proxytoken.Sign(bed.key, testAudience, u, time.Hour, time.Now()); err == nil {
		if got, err := bed.send(t, nil, tok, via); err == nil && !got.same(viaJSON(t, direct)) {
			t.Fatalf("unchecked proxy token for %#v: the API server saw %#v, the token carries %#v", u, got, viaJSON(t, direct))
		}
	}

	// A client's own impersonation request, nested and direct: what
	// the API server would decide given the same headers directly
	// (extra keys lowercased, as it reads them), or a refusal; a user
	// the last hop's rule accepts must get through.
	if u.Name != "" {
		asked := normal(u.Name, u.UID, u.Groups, lowerKeys(u.Extra))
		for _, nested := range []bool{true, false} {
			got, err := bed.ask(t, u, nested, via)
			deliverable := identityrule.Deliverable(&user.DefaultInfo{Name: u.Name, UID: u.UID, Groups: u.Groups, Extra: lowerKeys(u.Extra)}) == nil &&
				!groupsuffix.IsOriginalUserExtra(extraKey)
			switch {
			case err == nil && !got.same(asked):
				t.Fatalf("impersonation request (nested %v) for %#v: the API server saw %#v, asked %#v", nested, u, got, asked)
			case err != nil && deliverable:
				t.Fatalf("impersonation request (nested %v) for %#v refused, though it arrives unchanged", nested, u)
			}
		}
	}

	// Certificates carry no extras: the exchange refuses such users.
	cert, ok := bed.certFor(t, u)
	if !ok {
		return
	}
	// What kube-apiserver reads from the certificate itself.
	asCert := normal(cert.Subject.CommonName, certUID(cert), cert.Subject.Organization, nil)
	if accepted && len(u.Extra) == 0 {
		if !asCert.same(direct) {
			t.Fatalf("certificate for %#v reads as %#v, the identity is %#v", u, asCert, direct)
		}
		got, err := bed.send(t, cert, "", via)
		if err != nil || !got.same(direct) {
			t.Fatalf("certificate for %#v: the API server saw %#v (%v), directly %#v", u, got, err, direct)
		}
		return
	}
	// Any certificate the proxy trusts (the cluster's own CA's may name
	// anyone): refused, or delivered as the API server reads it.
	if slices.Contains(cert.Subject.Organization, user.AllUnauthenticated) {
		return // the API server's own group handling differs there; not an identity a CA issues
	}
	if got, err := bed.send(t, cert, "", via); err == nil && !got.same(asCert) {
		t.Fatalf("certificate naming %#v: the API server saw %#v, the certificate says %#v", u, got, asCert)
	}
}

// lowerKeys is extra with its keys in ASCII lower case, as the API server
// reads an Impersonate-Extra- header's name.
func lowerKeys(extra map[string][]string) map[string][]string {
	if extra == nil {
		return nil
	}
	out := make(map[string][]string, len(extra))
	for k, v := range extra {
		out[asciiLower(k)] = v
	}
	return out
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// viaJSON is s as a JSON document carries it.
func viaJSON(t *testing.T, s seen) seen {
	t.Helper()
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out seen
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return normal(out.Name, out.UID, out.Groups, out.Extra)
}

// certUID is the UID kube-apiserver reads from a client certificate.
func certUID(c *x509.Certificate) string {
	for _, n := range c.Subject.Names {
		if n.Type.String() == "1.3.6.1.4.1.57683.2" {
			if s, ok := n.Value.(string); ok {
				return s
			}
		}
	}
	return ""
}

// TestLookalikeIdentityIsRefused: the findings of the security review,
// each through a path that skips the exchange's rule: a token signed
// without it (Verify refuses it, 401) and a certificate of a CA the proxy
// trusts (the last hop refuses it, 403), on every upstream hop.
func TestLookalikeIdentityIsRefused(t *testing.T) {
	for _, constrained := range []bool{false, true} {
		bed := newArrivalBed(t, constrained)
		for _, u := range []*user.DefaultInfo{
			{Name: "alice", Groups: []string{" system:masters"}},
			{Name: "alice", Groups: []string{"\tsystem:masters"}},
			{Name: " system:kube-controller-manager"},
			{Name: "alice ", Groups: []string{"admins"}},
			{Name: "alice", Groups: []string{"admins "}},
			{Name: "alice", UID: "1234 "},
			{Name: "alice", Extra: map[string][]string{"example.com/tenant": {" acme"}}},
			{Name: "alice", Extra: map[string][]string{"Example.com/tenant": {"acme"}}},
		} {
			for _, via := range hops {
				tok, _, _, err := proxytoken.Sign(bed.key, testAudience, u, time.Hour, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				if got, err := bed.send(t, nil, tok, via); !errors.Is(err, errRefused) {
					t.Errorf("token for %q (%v): the API server saw %+v", u, via, got)
				}
				if len(u.Extra) > 0 {
					continue
				}
				cert, ok := bed.certFor(t, u)
				if !ok {
					t.Fatalf("no certificate for %q", u)
				}
				if got, err := bed.send(t, cert, "", via); !errors.Is(err, errRefused) {
					t.Errorf("certificate for %q (%v): the API server saw %+v", u, via, got)
				}
			}
		}
	}
}
