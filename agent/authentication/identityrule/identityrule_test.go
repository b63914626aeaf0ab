package identityrule_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/pinniped-kit/pinniped/agent/authentication/identityrule"
)

func TestExternal(t *testing.T) {
	for _, tc := range []struct {
		name string
		u    *user.DefaultInfo
		part string
		rule identityrule.Rule
	}{
		{"plain", &user.DefaultInfo{Name: "alice", UID: "42", Groups: []string{"admins", "a,b", "adm\tins"}, Extra: map[string][]string{"example.com/tenant": {"acme corp"}}}, "", ""},
		{"unicode spaces are part of a name, not trimmed", &user.DefaultInfo{Name: "alice\u00a0", Groups: []string{"\u00a0system:masters", "\u3000admins"}}, "", ""},
		{"case is part of a name", &user.DefaultInfo{Name: "System:admin", Groups: []string{"SYSTEM:MASTERS"}}, "", ""},
		{"credential ID is replaced, so its value is not checked", &user.DefaultInfo{Name: "alice", Extra: map[string][]string{user.CredentialIDKey: {"JTI=x "}}}, "", ""},
		{"nil", nil, identityrule.PartUsername, identityrule.RuleEmpty},
		{"empty username", &user.DefaultInfo{Groups: []string{"admins"}}, identityrule.PartUsername, identityrule.RuleEmpty},
		{"system username", &user.DefaultInfo{Name: "system:kube-controller-manager"}, identityrule.PartUsername, identityrule.RuleSystem},
		{"leading space username", &user.DefaultInfo{Name: " system:kube-controller-manager"}, identityrule.PartUsername, identityrule.RuleChanges},
		{"trailing space username", &user.DefaultInfo{Name: "alice "}, identityrule.PartUsername, identityrule.RuleChanges},
		{"tab username", &user.DefaultInfo{Name: "\talice"}, identityrule.PartUsername, identityrule.RuleChanges},
		{"NUL username", &user.DefaultInfo{Name: "ali\x00ce"}, identityrule.PartUsername, identityrule.RuleChanges},
		{"invalid UTF-8 username", &user.DefaultInfo{Name: "\xffalice"}, identityrule.PartUsername, identityrule.RuleChanges},
		{"UID", &user.DefaultInfo{Name: "alice", UID: "42 "}, identityrule.PartUID, identityrule.RuleChanges},
		{"system group", &user.DefaultInfo{Name: "alice", Groups: []string{"admins", "system:masters"}}, identityrule.PartGroup, identityrule.RuleSystem},
		{"leading space group", &user.DefaultInfo{Name: "alice", Groups: []string{" system:masters"}}, identityrule.PartGroup, identityrule.RuleChanges},
		{"leading tab group", &user.DefaultInfo{Name: "alice", Groups: []string{"\tsystem:masters"}}, identityrule.PartGroup, identityrule.RuleChanges},
		{"trailing space group", &user.DefaultInfo{Name: "alice", Groups: []string{"admins "}}, identityrule.PartGroup, identityrule.RuleChanges},
		{"DEL in a group", &user.DefaultInfo{Name: "alice", Groups: []string{"adm\x7fins"}}, identityrule.PartGroup, identityrule.RuleChanges},
		{"CR in a group", &user.DefaultInfo{Name: "alice", Groups: []string{"admins\r"}}, identityrule.PartGroup, identityrule.RuleChanges},
		{"extra value", &user.DefaultInfo{Name: "alice", Extra: map[string][]string{"example.com/tenant": {"acme "}}}, identityrule.PartExtraValue, identityrule.RuleChanges},
		{"extra key case", &user.DefaultInfo{Name: "alice", Extra: map[string][]string{"Example.com/tenant": {"acme"}}}, identityrule.PartExtraKey, identityrule.RuleKeyCase},
		{"empty extra key", &user.DefaultInfo{Name: "alice", Extra: map[string][]string{"": {"acme"}}}, identityrule.PartExtraKey, identityrule.RuleEmpty},
		{"Kubernetes extra", &user.DefaultInfo{Name: "alice", Extra: map[string][]string{"authentication.kubernetes.io/pod-name": {"p"}}}, identityrule.PartExtraKey, identityrule.RuleK8sDomain},
		{"Kubernetes extra in capitals", &user.DefaultInfo{Name: "alice", Extra: map[string][]string{"K8S.IO/x": {"p"}}}, identityrule.PartExtraKey, identityrule.RuleK8sDomain},
		{"proxy's extra", &user.DefaultInfo{Name: "alice", Extra: map[string][]string{"original-user-info.impersonation-proxy.concierge.tuna.io": {"{}"}}}, identityrule.PartExtraKey, identityrule.RuleProxyKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var u user.Info
			if tc.u != nil {
				u = tc.u
			}
			err := identityrule.External(u)
			if tc.rule == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var refused *identityrule.Error
			if !errors.As(err, &refused) || refused.Part != tc.part || refused.Rule != tc.rule {
				t.Fatalf("got %v, want %s %s", err, tc.part, tc.rule)
			}
			if v := refused.Value(); v != "" && strings.Contains(err.Error(), v) {
				t.Fatalf("the message names the value: %v", err)
			}
		})
	}
}

// TestDeliverable: the last hop's rule lets the cluster's own identities
// through (a certificate of its CA may name system:masters) and refuses
// only what a header would change.
func TestDeliverable(t *testing.T) {
	if err := identityrule.Deliverable(&user.DefaultInfo{Name: "kubernetes-admin", Groups: []string{"system:masters"},
		Extra: map[string][]string{"authentication.kubernetes.io/credential-id": {"X509SHA256=ab"}}}); err != nil {
		t.Fatalf("the cluster admin's certificate: %v", err)
	}
	for _, u := range []*user.DefaultInfo{
		{Name: "alice", Groups: []string{" system:masters"}},
		{Name: "system:admin "},
		{Name: "alice", Extra: map[string][]string{user.CredentialIDKey: {"X509SHA256=ab "}}},
		{Name: "alice", Extra: map[string][]string{"Example.com/x": {"y"}}},
		{},
	} {
		if identityrule.Deliverable(u) == nil {
			t.Errorf("%#v is deliverable", u)
		}
	}
}

// FuzzUnchangedMeansUnchanged: whatever Unchanged accepts comes out of a
// real HTTP/1.1 header round trip (Go's transport and Go's server, which
// kube-apiserver uses) byte for byte; and it refuses nothing valid in
// UTF-8 that comes out unchanged.
func FuzzUnchangedMeansUnchanged(f *testing.F) {
	for _, s := range []string{"admins", " system:masters", "system:masters\t", "a\tb", "a, b", "x\x00", "\u00a0x", "\xff", "", "é", "a\r\nb"} {
		f.Add(s)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Header.Get("Impersonate-Group"))
	}))
	f.Cleanup(srv.Close)
	f.Fuzz(func(t *testing.T, v string) {
		arrived, sent := roundTrip(t, srv, v)
		if identityrule.Unchanged(v) && (!sent || arrived != v) {
			t.Fatalf("Unchanged(%q), but it arrives as %q (sent %v)", v, arrived, sent)
		}
		if sent && arrived == v && utf8.ValidString(v) && !identityrule.Unchanged(v) {
			t.Fatalf("%q arrives unchanged, but Unchanged refuses it", v)
		}
	})
}

// roundTrip sends v in a request header to srv and returns what srv read;
// sent is false when the transport refuses the value.
func roundTrip(t *testing.T, srv *httptest.Server, v string) (arrived string, sent bool) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header["Impersonate-Group"] = []string{v}
	resp, err := srv.Client().Do(req)
	if err != nil {
		return "", false
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body), true
}
