//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// TestExchangeLoad measures TokenCredentialRequests through the real
// kube-apiserver aggregation layer to the agent's two replicas, at
// concurrency 1 and 8, and the agents' resident memory. It prints a table
// and asserts only that every exchange succeeded: speed is reported, not
// asserted (make bench-exchange runs it). Set PINNIPED_E2E_LOAD=1.
func TestExchangeLoad(t *testing.T) {
	if os.Getenv("PINNIPED_E2E_LOAD") == "" {
		t.Skip("a benchmark: run with PINNIPED_E2E_LOAD=1 (make bench-exchange)")
	}
	installAgent(t)
	cfg := Bed.Config()
	time.Sleep(20 * time.Second) // let start-up garbage be collected
	idle := agentRSS(t)
	url, body, pool := exchangeRequest(t)
	// Anonymous, as a login is: no client certificate, no token. Over
	// HTTP/1.1: kube-apiserver closes an HTTP/2 connection after each
	// anonymous request (UnauthenticatedHTTP2DOSMitigation), so an HTTP/2
	// client would measure TLS handshakes, not exchanges. That handshake
	// cost is real for a CLI, which makes one exchange per process: the
	// "new connection" row measures it.
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: 16,
	}}
	fresh := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true, DisableKeepAlives: true,
	}}
	post := func(c *http.Client, url string, headers map[string]string) (time.Duration, error) {
		start := time.Now()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		defer func() { _ = resp.Body.Close() }()
		var out struct {
			Status struct {
				Credential *json.RawMessage `json:"credential"`
			} `json:"status"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 201 || out.Status.Credential == nil {
			return 0, fmt.Errorf("HTTP %d, credential %v: %w", resp.StatusCode, out.Status.Credential != nil, err)
		}
		return time.Since(start), nil
	}
	viaAPIServer := func() (time.Duration, error) { return post(client, url, nil) }
	viaAPIServerFresh := func() (time.Duration, error) { return post(fresh, url, nil) }

	// The same request straight to one agent pod, as the front proxy sends
	// it, to split the aggregation layer's cost from the agent's.
	pod := strings.Fields(Kubectl(t, "-n", "pinniped", "get", "pods", "-l", "app.kubernetes.io/name=pinniped-agent", "-o", "jsonpath={.items[0].status.podIP}"))[0]
	servingCA, err := base64.StdEncoding.DecodeString(Kubectl(t, "-n", "pinniped", "get", "secret", "pinniped-agent-api-tls", "-o", "jsonpath={.data.ca\\.crt}"))
	if err != nil {
		t.Fatal(err)
	}
	agentPool := x509.NewCertPool()
	agentPool.AppendCertsFromPEM(servingCA)
	proxyCert, err := tls.LoadX509KeyPair(filepath.Join(cfg.PKIDir(), "front-proxy-client.crt"), filepath.Join(cfg.PKIDir(), "front-proxy-client.key"))
	if err != nil {
		t.Fatal(err)
	}
	direct := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: agentPool, ServerName: "pinniped-agent-api.pinniped.svc", Certificates: []tls.Certificate{proxyCert}, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 16, ForceAttemptHTTP2: true,
	}}
	directURL := "https://" + net.JoinHostPort(pod, "10250") + "/apis/login.concierge.pinniped.dev/v1alpha1/tokencredentialrequests"
	viaPod := func() (time.Duration, error) {
		return post(direct, directURL, map[string]string{"X-Remote-User": "system:anonymous", "X-Remote-Group": "system:unauthenticated"})
	}

	rows := []string{"| path | concurrency | exchanges | req/s | p50 | p99 |", "|---|---|---|---|---|---|"}
	for _, target := range []struct {
		name string
		do   func() (time.Duration, error)
	}{
		{"kube-apiserver (aggregated), kept-alive connections", viaAPIServer},
		{"kube-apiserver (aggregated), a new TLS connection each, as each CLI process", viaAPIServerFresh},
		{"one agent pod directly", viaPod},
	} {
		for range 50 { // warm up connections and the JWKS cache
			if _, err := target.do(); err != nil {
				t.Fatal(err)
			}
		}
		for _, conc := range []int{1, 8} {
			r := runLoad(t, conc, conc*250, target.do)
			rows = append(rows, fmt.Sprintf("| %s | %d | %d | %.0f | %v | %v |", target.name, conc, r.n, r.rps, r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond)))
		}
	}
	rss := agentRSS(t)
	t.Logf("TokenCredentialRequest through kube-apiserver to the agent (%s profile, 2 replicas):\n%s\nagent RSS idle: %s; after the run: %s",
		cfg.Profile, strings.Join(rows, "\n"), idle, rss)
}

// exchangeRequest is a TokenCredentialRequest for alice's Dex ID token at
// the "dex" JWTAuthenticator: the URL through kube-apiserver, the body,
// and the cluster's CA.
func exchangeRequest(t *testing.T) (url string, body []byte, pool *x509.CertPool) {
	t.Helper()
	cfg := Bed.Config()
	token, ok := PasswordLogin(t, context.Background(), testbed.DexUsers[0]).Extra("id_token").(string)
	if !ok || token == "" {
		t.Fatal("Dex's password grant gave no ID token")
	}
	body, _ = json.Marshal(map[string]any{
		"apiVersion": "login.concierge.pinniped.dev/v1alpha1", "kind": "TokenCredentialRequest",
		"spec": map[string]any{"token": token, "authenticator": map[string]any{
			"apiGroup": "authentication.concierge.pinniped.dev", "kind": "JWTAuthenticator", "name": "dex"}},
	})
	caPEM, err := os.ReadFile(cfg.ClusterCAFile())
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return cfg.APIServerURL() + "/apis/login.concierge.pinniped.dev/v1alpha1/tokencredentialrequests", body, pool
}

// loadResult is what runLoad measured.
type loadResult struct {
	n        int
	rps      float64
	p50, p99 time.Duration
}

// runLoad calls do total times from conc goroutines and reports throughput
// and latency percentiles; a failed call fails the test.
func runLoad(t *testing.T, conc, total int, do func() (time.Duration, error)) loadResult {
	t.Helper()
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range total / conc {
				d, err := do()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if len(lat) == 0 {
		t.Fatal("no request succeeded")
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
	return loadResult{len(lat), float64(len(lat)) / elapsed.Seconds(), p(0.5), p(0.99)}
}

var rssLine = regexp.MustCompile(`(?m)^process_resident_memory_bytes ([0-9.e+]+)$`)

// agentRSS reads each agent pod's process_resident_memory_bytes through the
// API server's pod proxy.
func agentRSS(t *testing.T) string {
	pods := strings.Fields(Kubectl(t, "-n", "pinniped", "get", "pods", "-l", "app.kubernetes.io/name=pinniped-agent", "-o", "jsonpath={.items[*].metadata.name}"))
	var out []string
	for _, p := range pods {
		metrics, err := RunE(nil, "kubectl", "get", "--raw", "/api/v1/namespaces/pinniped/pods/"+p+":8080/proxy/metrics")
		if err != nil {
			out = append(out, p+": "+err.Error())
			continue
		}
		if m := rssLine.FindStringSubmatch(metrics); m != nil {
			var b float64
			_, _ = fmt.Sscanf(m[1], "%g", &b)
			out = append(out, fmt.Sprintf("%s %.1f MiB", p, b/(1<<20)))
		}
	}
	return strings.Join(out, ", ")
}
