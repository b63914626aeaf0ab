package oidclogin

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// flushRecorder keeps what a handler writes in a buffer, as the server's
// connection does, and counts it sent only once flushed.
type flushRecorder struct {
	mu        sync.Mutex
	header    http.Header
	buf, sent bytes.Buffer
}

func (f *flushRecorder) Header() http.Header { return f.header }
func (f *flushRecorder) WriteHeader(int)     {}
func (f *flushRecorder) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buf.Write(p)
}

func (f *flushRecorder) Flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent.Write(f.buf.Bytes())
	f.buf.Reset()
}

// TestCallbackPageIsSentBeforeTheResult: BrowserLogin closes the callback
// server as soon as the result is in, which can be before the handler
// returns; the page telling the person how the login went must already be
// on its way by then, whole.
func TestCallbackPageIsSentBeforeTheResult(t *testing.T) {
	for _, tc := range []struct{ query, want string }{
		{"code=c0de&state=s", "Logged in"},
		{"error=access_denied&state=s", "Login failed"},
	} {
		results := make(chan callbackResult) // the handler's send is the moment the login may end
		rec := &flushRecorder{header: http.Header{}}
		go callbackHandler("s", "https://issuer.example", results).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/callback?"+tc.query, nil))
		<-results
		rec.mu.Lock()
		sent := rec.sent.String()
		rec.mu.Unlock()
		if !strings.Contains(sent, tc.want) || !strings.HasSuffix(sent, "</html>") {
			t.Fatalf("%s: when the result was passed on, the page sent was %q", tc.query, sent)
		}
		// A length, so that a browser knows the page is whole even if the connection is then closed.
		if rec.header.Get("Content-Length") != strconv.Itoa(len(sent)) {
			t.Errorf("%s: Content-Length %q for %d bytes", tc.query, rec.header.Get("Content-Length"), len(sent))
		}
	}
}
