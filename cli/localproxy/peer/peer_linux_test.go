//go:build linux

package peer

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/pinniped-kit/pinniped/cli/localuser"
)

// TestCheckRefusesAnotherUser runs the wrapper on a real server: our own
// connection passes; a connection recorded as another uid's, or as
// unknown, is 403 and never reaches the handler.
func TestCheckRefusesAnotherUser(t *testing.T) {
	reached := 0
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { reached++; w.WriteHeader(http.StatusNoContent) })
	get := func(lookup func(net.Addr, net.Addr) (int, error)) (int, string) {
		t.Helper()
		srv := httptest.NewUnstartedServer(Check(next))
		srv.Config.ConnContext = localuser.ConnContextWith(lookup)
		srv.Start()
		defer srv.Close()
		resp, err := http.Get(srv.URL) //nolint:noctx // a test's client
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get(localuser.UID); code != http.StatusNoContent || reached != 1 {
		t.Fatalf("our own request: %d, reached %d", code, reached)
	}
	for name, lookup := range map[string]func(net.Addr, net.Addr) (int, error){
		"another uid": func(net.Addr, net.Addr) (int, error) { return os.Getuid() + 1, nil },
		"unknown":     func(net.Addr, net.Addr) (int, error) { return 0, os.ErrNotExist },
	} {
		if code, body := get(lookup); code != http.StatusForbidden || reached != 1 || !strings.Contains(body, `"kind":"Status"`) {
			t.Errorf("%s: %d %s, reached %d; want a 403 Status", name, code, body, reached)
		}
	}
	rec := httptest.NewRecorder()
	Check(next).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusForbidden || reached != 1 {
		t.Errorf("no ConnContext: %d, reached %d; want 403", rec.Code, reached)
	}
}
