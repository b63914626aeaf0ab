package exchange_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"

	loginv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/login/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth"
	"github.com/pinniped-kit/pinniped/agent/endpoints/exchange"
)

// TestSlowBodyIsCutOff: an anonymous client that sends its body a byte at a
// time is answered (and its connection freed) once the body timeout passes,
// instead of holding the connection and a goroutine for as long as it likes.
func TestSlowBodyIsCutOff(t *testing.T) {
	f := newFixture(t)
	f.handler.BodyTimeout = 300 * time.Millisecond
	srv := httptest.NewServer(f.handler)
	t.Cleanup(srv.Close)

	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"apiVersion":"login.concierge.pinniped.dev/v1alpha1","kind":"TokenCredentialRequest","spec":{"token":"x"}}`
	fmt.Fprintf(conn, "POST /apis/login.concierge.pinniped.dev/v1alpha1/tokencredentialrequests HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	done := make(chan struct{})
	defer close(done)
	go func() {
		for i := 0; i < len(body); i++ {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if _, err := io.WriteString(conn, body[i:i+1]); err != nil {
				return
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer within 5 s to a body trickling in (a byte per 200 ms): %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, want 400", resp.StatusCode)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("answered after %v", took)
	}
}

// TestBodyTimeoutDoesNotCutSlowExchanges: the deadline covers only the
// body; an exchange whose authenticator takes longer (a slow webhook) keeps
// its request context and answers.
func TestBodyTimeoutDoesNotCutSlowExchanges(t *testing.T) {
	f := newFixture(t)
	f.handler.BodyTimeout = 200 * time.Millisecond
	f.handler.Authenticators = slowAuthenticator{next: f.reg, delay: 700 * time.Millisecond}
	srv := httptest.NewServer(f.handler)
	t.Cleanup(srv.Close)
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+tcrPath,
		strings.NewReader(tcrBody(f.token(t, nil), "JWTAuthenticator", "dex")))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out loginv1alpha1.TokenCredentialRequest
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated || out.Status.Credential == nil {
		t.Fatalf("status %d, %+v (%v); want a credential after a 700 ms authenticator", resp.StatusCode, out.Status, err)
	}
}

type slowAuthenticator struct {
	next  exchange.TokenAuthenticator
	delay time.Duration
}

func (s slowAuthenticator) AuthenticateToken(ctx context.Context, k tokenauth.Key, token string) (*authenticator.Response, error) {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, fmt.Errorf("the request was cancelled while authenticating: %w", ctx.Err())
	}
	return s.next.AuthenticateToken(ctx, k, token)
}

// TestSlowBodyIsCutOffOverHTTP2: the same on an HTTP/2 stream, which is
// what kube-apiserver and kubectl speak.
func TestSlowBodyIsCutOffOverHTTP2(t *testing.T) {
	f := newFixture(t)
	f.handler.BodyTimeout = 300 * time.Millisecond
	srv := httptest.NewUnstartedServer(f.handler)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)

	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		for _, b := range []byte(tcrBody("x", "JWTAuthenticator", "dex")) {
			time.Sleep(200 * time.Millisecond)
			if _, err := pw.Write([]byte{b}); err != nil {
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+tcrPath, pr)
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("no answer within 5 s to a body trickling in over HTTP/2: %v", err)
	}
	_ = resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("HTTP/%d status %d, want HTTP/2 400", resp.ProtoMajor, resp.StatusCode)
	}
}
