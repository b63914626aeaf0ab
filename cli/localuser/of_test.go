package localuser

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// TestOf: on a server with ConnContext, our own request is ours; on one
// without, Of says so instead of guessing.
func TestOf(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uid, err := Of(r)
		_, _ = fmt.Fprintf(w, "%d %v", uid, err)
	})
	get := func(url string) string {
		t.Helper()
		resp, err := http.Get(url) //nolint:noctx // a test's client
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}

	srv := httptest.NewUnstartedServer(handler)
	srv.Config.ConnContext = ConnContext
	srv.Start()
	defer srv.Close()
	if got, want := get(srv.URL), fmt.Sprintf("%d <nil>", os.Getuid()); got != want {
		t.Errorf("our own request: %q, want %q", got, want)
	}

	bare := httptest.NewServer(handler)
	defer bare.Close()
	if got := get(bare.URL); !strings.Contains(got, ErrNoConnContext.Error()) {
		t.Errorf("without ConnContext: %q, want ErrNoConnContext", got)
	}
	if _, err := Of(httptest.NewRequest(http.MethodGet, "/", nil)); !errors.Is(err, ErrNoConnContext) {
		t.Errorf("a request of no server: %v, want ErrNoConnContext", err)
	}
}
