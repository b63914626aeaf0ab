// Package localproxytest holds what the local proxy's tests and the
// command's share: an API server that records the credential each request
// carried, a kubeconfig with one pinniped context, and a buffer that
// goroutines write to while a test reads it.
package localproxytest

import (
	"bytes"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// SyncBuffer is a bytes.Buffer safe for concurrent writers and readers.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// APIServer answers a namespace list (one namespace, "seen-upstream"),
// 404 to anything else, and records the Authorization each request
// carried. It speaks HTTP/2 and HTTP/1.1.
type APIServer struct {
	*httptest.Server
	mu    sync.Mutex
	auths []string
}

// NewAPIServer starts one, closed when the test ends.
func NewAPIServer(t *testing.T) *APIServer {
	t.Helper()
	a := &APIServer{}
	a.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.auths = append(a.auths, strings.Join(r.Header.Values("Authorization"), ","))
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/api/v1/namespaces" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":404}`))
			return
		}
		_, _ = w.Write([]byte(`{"kind":"NamespaceList","apiVersion":"v1","metadata":{},"items":[{"metadata":{"name":"seen-upstream"}}]}`))
	}))
	a.EnableHTTP2 = true
	a.StartTLS()
	t.Cleanup(a.Close)
	return a
}

// Seen is each request's Authorization, in order.
func (a *APIServer) Seen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.auths...)
}

// WriteKubeconfig writes dir/kubeconfig with a context "dev" (namespace
// "team") whose user runs `pinniped login static --token=upstream-token`
// (no agent: the token is the credential), and "other", the current one,
// which does not use pinniped; both reach a.
func WriteKubeconfig(t *testing.T, dir string, a *APIServer) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: a.URL,
		CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.Certificate().Raw})}
	cfg.AuthInfos["pinniped"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1", Command: "pinniped",
		Args: []string{"login", "static", "--token=upstream-token"}, InteractiveMode: clientcmdapi.IfAvailableExecInteractiveMode,
	}}
	cfg.AuthInfos["cert"] = &clientcmdapi.AuthInfo{Token: "not-pinniped"} //nolint:gosec // a placeholder for a user that does not run pinniped
	cfg.Contexts["dev"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "pinniped", Namespace: "team"}
	cfg.Contexts["other"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "cert"}
	cfg.CurrentContext = "other"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
