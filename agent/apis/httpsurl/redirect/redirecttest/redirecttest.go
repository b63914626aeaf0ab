// Package redirecttest proves, with real servers, that an HTTP client
// follows redirects as package redirect allows: each client the CLI and the
// agent build for secrets is put through the same Check.
package redirecttest

import (
	"bytes"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl"
	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl/redirect"
)

// secret is what the requests carry, as a password grant would.
const secret = "grant_type=password&password=hunter2&client_secret=s3cr3t"

// recorder is a server that keeps every request body it receives.
type recorder struct {
	mu     sync.Mutex
	bodies []string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.bodies = append(r.bodies, req.Method+" "+req.URL.Path+" "+string(b))
	r.mu.Unlock()
	_, _ = io.WriteString(w, "reached")
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...)
}

// redirectingServers are a plain-http server (plain), another https
// origin (other), and an https server (srv) whose paths redirect to them
// and, with /moved, to its own /here (self).
func redirectingServers(t *testing.T) (srv, plainSrv *httptest.Server, plain, other, self *recorder) {
	t.Helper()
	plain, other, self = &recorder{}, &recorder{}, &recorder{}
	plainSrv = httptest.NewServer(plain)
	t.Cleanup(plainSrv.Close)
	otherSrv := httptest.NewTLSServer(other)
	t.Cleanup(otherSrv.Close)
	mux := http.NewServeMux()
	mux.HandleFunc("/to-plain", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plainSrv.URL+"/token", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/to-plain-permanent", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plainSrv.URL+"/token", http.StatusPermanentRedirect)
	})
	mux.HandleFunc("/to-other", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, otherSrv.URL+"/token", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/see-other", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, otherSrv.URL+"/token", http.StatusSeeOther)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/here", http.StatusTemporaryRedirect)
	})
	mux.Handle("/here", self)
	srv = httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	return srv, plainSrv, plain, other, self
}

// Check runs newClient's client (trusting the CA bundle it is given)
// against an https server that redirects with 307 to a plain-http server,
// to another https origin and to itself, and fails t unless: nothing
// reaches the plain-http server and the error says why; a POST is not
// resent to another origin; a GET is followed within the origin.
func Check(t *testing.T, newClient func(caBundle []byte) (*http.Client, error)) {
	t.Helper()
	srv, plainSrv, plain, other, self := redirectingServers(t)
	// httptest's TLS servers share one certificate, so this trusts both.
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	client, err := newClient(ca)
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path string) error {
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(secret)
		}
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		if !bytes.Equal(b, []byte("reached")) {
			t.Errorf("%s %s: answer %q", method, path, b)
		}
		return nil
	}

	for _, c := range []struct{ method, path string }{
		{http.MethodPost, "/to-plain"}, {http.MethodPost, "/to-plain-permanent"}, {http.MethodGet, "/to-plain"},
	} {
		err := do(c.method, c.path)
		if !errors.Is(err, httpsurl.ErrNotHTTPS) || !strings.Contains(err.Error(), "redirected to "+plainSrv.URL+"/token") ||
			!strings.Contains(err.Error(), "only https redirects are followed") {
			t.Errorf("%s %s redirected to plain http: want a refusal naming the http URL, got %v", c.method, c.path, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s %s: the error shows the body: %v", c.method, c.path, err)
		}
	}
	if got := plain.got(); len(got) != 0 {
		t.Errorf("the plain-http server received %q; it must receive nothing", got)
	}

	if err := do(http.MethodPost, "/to-other"); !errors.Is(err, redirect.ErrCrossOrigin) {
		t.Errorf("POST redirected with 307 to another origin: want it refused, got %v", err)
	}
	// A 303 turns the POST into a GET, which would carry the POST's headers
	// (a client's Basic credentials among them) to the other origin.
	if err := do(http.MethodPost, "/see-other"); !errors.Is(err, redirect.ErrCrossOrigin) {
		t.Errorf("POST redirected with 303 to another origin: want it refused, got %v", err)
	}
	if got := other.got(); len(got) != 0 {
		t.Errorf("the other origin received %q; neither a POST's body nor its headers may follow a redirect there", got)
	}

	if err := do(http.MethodGet, "/moved"); err != nil {
		t.Errorf("GET redirected within its https origin must be followed: %v", err)
	}
	if err := do(http.MethodPost, "/moved"); err != nil {
		t.Errorf("POST redirected with 307 within its https origin must be followed: %v", err)
	}
	if got, want := self.got(), []string{"GET /here ", "POST /here " + secret}; !slices.Equal(got, want) {
		t.Errorf("same-origin redirects delivered %q, want %q", got, want)
	}
	if err := do(http.MethodGet, "/to-other"); err != nil {
		t.Errorf("GET redirected to another https origin must be followed: %v", err)
	}
}
