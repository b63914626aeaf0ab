package oidclogin

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// flushRecorder keeps what a handler writes in a buffer, as the server's
// connection does, and counts it sent only once flushed; late records a
// write or flush after the result was passed on.
type flushRecorder struct {
	header    http.Header
	buf, sent bytes.Buffer
	results   chan callbackResult
	late      bool
}

func (f *flushRecorder) Header() http.Header { return f.header }
func (f *flushRecorder) WriteHeader(int)     {}
func (f *flushRecorder) Write(p []byte) (int, error) {
	f.late = f.late || len(f.results) > 0
	return f.buf.Write(p)
}

func (f *flushRecorder) Flush() {
	f.late = f.late || len(f.results) > 0
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
		results := make(chan callbackResult, 1)
		rec := &flushRecorder{header: http.Header{}, results: results}
		callbackHandler("s", "https://issuer.example", results).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/callback?"+tc.query, nil))
		select {
		case <-results:
		default:
			t.Fatalf("%s: no result passed on", tc.query)
		}
		sent := rec.sent.String()
		if rec.late || rec.buf.Len() > 0 || !strings.Contains(sent, tc.want) || !strings.HasSuffix(sent, "</html>") {
			t.Fatalf("%s: the page was not all sent before the result was passed on (sent %q)", tc.query, sent)
		}
		// A length, so that a browser knows the page is whole even if the connection is then closed.
		if rec.header.Get("Content-Length") != strconv.Itoa(len(sent)) {
			t.Errorf("%s: Content-Length %q for %d bytes", tc.query, rec.header.Get("Content-Length"), len(sent))
		}
	}
}
