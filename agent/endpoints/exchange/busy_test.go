package exchange_test

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/webhook"
	"github.com/pinniped-kit/pinniped/agent/endpoints/exchange"
)

// TestConcurrentExchangesAreBounded: with MaxExchanges exchanges held by
// a webhook that does not answer, the next one is answered 429 Too Many
// Requests with Retry-After, in the Status shape client-go understands,
// after waiting no longer than SlotWait; once the held ones finish, an
// exchange is served again.
func TestConcurrentExchangesAreBounded(t *testing.T) {
	const limit = 3
	f := newFixture(t)
	arrived := make(chan struct{}, 16)
	release := make(chan struct{})
	hook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","status":{"authenticated":true,"user":{"username":"alice","groups":["devs"]}}}`)
	}))
	t.Cleanup(hook.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	wh, err := webhook.New(webhook.Config{Endpoint: hook.URL, CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw})})
	if err != nil {
		t.Fatal(err)
	}
	f.reg.Set(tokenauth.Key{Kind: "WebhookAuthenticator", Name: "hook"}, wh)
	f.handler.MaxExchanges, f.handler.SlotWait = limit, 50*time.Millisecond
	srv := httptest.NewServer(f.handler)
	t.Cleanup(srv.Close)

	post := func(token string) (int, http.Header, []byte, error) {
		// Bounded, so that an exchange the handler lets through to the
		// held webhook fails the test rather than hanging it.
		client := &http.Client{Timeout: 5 * time.Second}
		resp, err := client.Post(srv.URL+tcrPath, "application/json", strings.NewReader(tcrBody(token, "WebhookAuthenticator", "hook")))
		if err != nil {
			return 0, nil, nil, err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, body, err
	}

	var wg sync.WaitGroup
	held := make([]int, limit)
	for i := range limit {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, _, _, err := post(fmt.Sprintf("held-%d", i)); err == nil {
				held[i] = code
			}
		}()
	}
	for range limit {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("the held exchanges did not reach the webhook")
		}
	}

	start := time.Now()
	code, header, body, err := post("one-too-many")
	if err != nil {
		t.Fatal(err)
	}
	// Far above SlotWait (a loaded -race run) and below the client's
	// timeout, so a handler that waits for a slot until one frees fails here.
	if waited := time.Since(start); waited > 3*time.Second {
		t.Errorf("the refused exchange waited %s for a slot (SlotWait %s)", waited, f.handler.SlotWait)
	}
	if code != http.StatusTooManyRequests || header.Get("Retry-After") != "1" {
		t.Fatalf("exchange beyond the bound: HTTP %d, Retry-After %q: %s", code, header.Get("Retry-After"), body)
	}
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	if st.Kind != "Status" || st.Reason != metav1.StatusReasonTooManyRequests || st.Code != http.StatusTooManyRequests ||
		st.Details == nil || st.Details.RetryAfterSeconds != exchange.RetryAfterSeconds || !strings.Contains(st.Message, "try again") {
		t.Fatalf("429 body is not a TooManyRequests Status: %s", body)
	}
	select {
	case <-arrived:
		t.Fatal("the refused exchange reached the webhook")
	default:
	}

	close(release)
	wg.Wait()
	for i, code := range held {
		if code != http.StatusCreated {
			t.Errorf("held exchange %d: HTTP %d", i, code)
		}
	}
	if code, _, body, err := post("after"); err != nil || code != http.StatusCreated {
		t.Fatalf("an exchange after the held ones finished: %v %s", err, body)
	}
}
