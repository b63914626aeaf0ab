//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// TestProxyLoad compares the impersonation proxy with direct kube-apiserver access, as
// the same Dex user, on GET (one object) and LIST (50 ConfigMaps) at concurrency 1 and
// 16, in the same run, beside the API server alone impersonating and beside a second
// installation's proxy (benchInstallations). It prints req/s, p50 and p99, the proxy's
// ratio and added p50, and the CPU time per request of each installation's pods and of
// kube-apiserver; then the proxies alone with audit lines for changes only, and with a
// 100m CPU limit. It asserts only that every request succeeded (make bench-proxy runs
// it; set PINNIPED_E2E_LOAD=1). Needs the managed profile, where auto mode runs the proxy.
func TestProxyLoad(t *testing.T) {
	if os.Getenv("PINNIPED_E2E_LOAD") == "" {
		t.Skip("a benchmark: run with PINNIPED_E2E_LOAD=1 (make bench-proxy)")
	}
	cfg := Bed.Config()
	if cfg.Profile != testbed.ProfileManaged {
		t.Fatalf("the proxy benchmark needs the managed profile (PINNIPED_E2E_PROFILES=managed), not %s", cfg.Profile)
	}
	pinniped := installAgent(t)
	strategy := waitProxyStrategy(t, "the proxy is advertised", proxySucceeds)
	// The other installation's proxy (see benchInstallations), loaded in
	// the same rounds, as the same user.
	other := benchInstallations(t, pinniped)[1]
	otherStrategy := other.waitProxyStrategy(t, other.name+"'s proxy is advertised", proxySucceeds)
	ctx := context.Background()

	const ns = "proxy-load"
	Kubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { _, _ = RunE(nil, "kubectl", "delete", "namespace", ns, "--wait=false") })
	Kubectl(t, "create", "clusterrolebinding", "proxy-load-view", "--clusterrole=view", "--group=developers")
	t.Cleanup(func() { _, _ = RunE(nil, "kubectl", "delete", "clusterrolebinding", "proxy-load-view") })
	for i := range 50 {
		Kubectl(t, "-n", ns, "create", "configmap", fmt.Sprintf("cm-%02d", i), "--from-literal=k=v")
	}

	alice := testbed.DexUsers[0]
	idToken := func() string { return PasswordLogin(t, ctx, alice).Extra("id_token").(string) }
	clusterCA, err := os.ReadFile(cfg.ClusterCAFile())
	if err != nil {
		t.Fatal(err)
	}
	client := func(ca []byte, pair tls.Certificate) *http.Client {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 32,
		}}
	}
	pair := func(cert, key []byte) tls.Certificate {
		p, err := tls.X509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	type target struct {
		name string
		c    *http.Client
		base string
	}
	// The order of targets below.
	const (
		direct = iota
		proxy
		impersonated
		otherProxy
	)
	// fresh are the targets with new credentials and connections: the
	// certificates live 5 minutes, less than the whole run.
	fresh := func() []target {
		// Direct: a certificate for the real API server (the CSR strategy on this profile).
		directCred := exchange(t, idToken(), "JWTAuthenticator", "dex")
		if directCred.Cert == "" {
			t.Fatalf("exchange for a direct certificate: %+v", directCred)
		}
		// Proxies: a client certificate for alice at each, as these rows
		// always measured.
		proxyClient := func(in installation, s proxyStrategy) *http.Client {
			a := proxyLoadAuth(t, in, s, idToken(), alice)
			c := client(s.CA, tls.Certificate{})
			c.Transport.(*http.Transport).TLSClientConfig.Certificates = a.certificates()
			if a.token != "" {
				c.Transport = bearerTransport{base: c.Transport, token: a.token}
			}
			return c
		}
		// What the proxy sends, straight to the API server: the
		// impersonate-only ServiceAccount's token and alice's identity in
		// Impersonate-* headers. This splits the API server's cost of
		// impersonation from the proxy hop's.
		saToken := strings.TrimSpace(Kubectl(t, "-n", "pinniped", "create", "token", "pinniped-agent-proxy"))
		impersonating := client(clusterCA, tls.Certificate{})
		impersonating.Transport = headerTransport{base: impersonating.Transport, h: http.Header{
			"Authorization": {"Bearer " + saToken}, "Impersonate-User": {alice.Email}, "Impersonate-Group": {"developers", "admins"},
		}}
		return []target{
			direct:       {"direct", client(clusterCA, pair([]byte(directCred.Cert), []byte(directCred.Key))), cfg.APIServerURL()},
			proxy:        {"proxy", proxyClient(ourInstall, strategy), strategy.Endpoint},
			impersonated: {"impersonating", impersonating, cfg.APIServerURL()},
			otherProxy:   {"proxy: " + other.name, proxyClient(other, otherStrategy), otherStrategy.Endpoint},
		}
	}
	targets := fresh()
	requests := []struct{ name, path string }{
		{"GET namespace", "/api/v1/namespaces/" + ns},
		{"LIST 50 configmaps", "/api/v1/namespaces/" + ns + "/configmaps"},
	}
	get := func(c *http.Client, url string) (time.Duration, error) {
		start := time.Now()
		resp, err := c.Get(url)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
		}
		return time.Since(start), nil
	}
	run := func(c *http.Client, url string, conc, total int) loadResult {
		return runLoad(t, conc, total, func() (time.Duration, error) { return get(c, url) })
	}

	// CPU per request: each installation's pods and kube-apiserver, read
	// over both rounds of each row.
	time.Sleep(15 * time.Second) // start-up garbage collected
	servers := func() []server {
		return []server{
			podServer(t, "ours", ourInstall.namespace, ourInstall.selector),
			podServer(t, other.name, other.namespace, other.selector, other.kubectlArgs()...),
			daemonServer(t, "kube-apiserver"),
		}
	}
	srv := servers()
	idleRSS := fmt.Sprintf("ours %s; %s %s", srv[0].rssText(), other.name, srv[1].rssText())
	cpuHeader := func() []string {
		return []string{"| request | concurrency | path | requests | our pods CPU µs/request | " + other.name + " pods CPU µs/request | kube-apiserver CPU µs/request |",
			"|---|---|---|---|---|---|---|"}
	}
	cpuRows := cpuHeader()
	// measure runs each target, then all again in the other order, keeping
	// the better of each (other work on this 2-core machine then biases none
	// of them), and what each cost every server over both rounds.
	type measured struct {
		best  loadResult
		n     int
		spent []time.Duration
	}
	measure := func(srv []server, ts []int, path string, conc, total int) map[int]*measured {
		out := map[int]*measured{}
		reversed := slices.Clone(ts)
		slices.Reverse(reversed)
		for _, order := range [][]int{ts, reversed} {
			for _, i := range order {
				before := make([]time.Duration, len(srv))
				for k, sv := range srv {
					before[k] = mustCPU(t, sv)
				}
				r := run(targets[i].c, targets[i].base+path, conc, total)
				m := out[i]
				if m == nil {
					m = &measured{spent: make([]time.Duration, len(srv))}
					out[i] = m
				}
				m.n += r.n
				for k, sv := range srv {
					m.spent[k] += mustCPU(t, sv) - before[k]
				}
				if r.rps > m.best.rps {
					m.best = r
				}
			}
		}
		return out
	}
	cpuRow := func(srv []server, rq string, conc int, name string, m *measured) string {
		cells := make([]string, len(srv))
		for k, sv := range srv {
			cells[k] = microsPer(sv, m.spent[k], m.n)
		}
		return fmt.Sprintf("| %s | %d | %s | %d | %s |", rq, conc, name, m.n, strings.Join(cells, " | "))
	}
	rd := func(x time.Duration) time.Duration { return x.Round(10 * time.Microsecond) }
	rows := []string{
		"| request | concurrency | direct req/s | proxy req/s | ratio | direct p50 | proxy p50 | added p50 | direct p99 | proxy p99 | impersonating req/s | impersonating p50 | " + other.name + " proxy req/s | its p50 | its p99 |",
		"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
	}
	for _, rq := range requests {
		targets = fresh()
		for _, tg := range targets { // warm up connections and caches
			run(tg.c, tg.base+rq.path, 4, 200)
		}
		for _, conc := range []int{1, 16} {
			total := 800
			if conc > 1 {
				total = 3200
			}
			all := []int{direct, proxy, impersonated, otherProxy}
			ms := measure(srv, all, rq.path, conc, total)
			for _, i := range all {
				cpuRows = append(cpuRows, cpuRow(srv, rq.name, conc, targets[i].name, ms[i]))
			}
			d, p, imp, o := ms[direct].best, ms[proxy].best, ms[impersonated].best, ms[otherProxy].best
			rows = append(rows, fmt.Sprintf("| %s | %d | %.0f | %.0f | %.2fx | %v | %v | %v | %v | %v | %.0f | %v | %.0f | %v | %v |",
				rq.name, conc, d.rps, p.rps, p.rps/d.rps, rd(d.p50), rd(p.p50), rd(p.p50-d.p50), rd(d.p99), rd(p.p99), imp.rps, rd(imp.p50),
				o.rps, rd(o.p50), rd(o.p99)))
		}
	}
	// The proxies alone again with audit lines only for changes
	// (--proxy-audit=changes): every request above wrote one, through the
	// container runtime's log pipe, which costs CPU the API server shares.
	// The other installation gets the flag only when it is this build.
	Run(t, nil, pinniped, installArgs(t, "--proxy-audit=changes")...)
	Kubectl(t, "-n", "pinniped", "rollout", "status", "deployment/pinniped-agent", "--timeout=3m")
	otherAudit := "as it is"
	if other.installedHere {
		Run(t, nil, pinniped, installArgs(t, "--proxy-audit=changes", "--api-group-suffix="+other.suffix, "--namespace="+other.namespace)...)
		Kubectl(t, "-n", other.namespace, "rollout", "status", "deployment/pinniped-agent", "--timeout=3m")
		otherAudit = "--proxy-audit=changes"
	}
	proxiesOnly := func(title string) {
		time.Sleep(15 * time.Second) // the old pods gone, start-up garbage collected
		srv := servers()
		idle := fmt.Sprintf("ours %s; %s %s", srv[0].rssText(), other.name, srv[1].rssText())
		rows = append(rows, "", title+":", "| request | concurrency | path | req/s | p50 | p99 |", "|---|---|---|---|---|---|")
		cpuRows = append(cpuRows, "", title+":")
		cpuRows = append(cpuRows, cpuHeader()...)
		proxies := []int{proxy, otherProxy}
		for _, rq := range requests {
			targets = fresh()
			for _, i := range proxies {
				run(targets[i].c, targets[i].base+rq.path, 4, 200)
			}
			for _, conc := range []int{1, 16} {
				total := 800
				if conc > 1 {
					total = 3200
				}
				ms := measure(srv, proxies, rq.path, conc, total)
				for _, i := range proxies {
					r := ms[i].best
					rows = append(rows, fmt.Sprintf("| %s | %d | %s | %.0f | %v | %v |", rq.name, conc, targets[i].name, r.rps, rd(r.p50), rd(r.p99)))
					cpuRows = append(cpuRows, cpuRow(srv, rq.name, conc, targets[i].name, ms[i]))
				}
			}
		}
		rows = append(rows, fmt.Sprintf("resident memory idle: %s; after: ours %s; %s %s", idle, srv[0].rssText(), other.name, srv[1].rssText()))
	}
	proxiesOnly("ours with --proxy-audit=changes, " + other.name + " " + otherAudit)
	// And held to a tenth of a core each, as many clusters run them.
	ourInstall.setCPULimit(t, "100m")
	other.setCPULimit(t, "100m")
	proxiesOnly("the same with a 100m CPU limit on each installation")
	t.Logf("(impersonating: straight to kube-apiserver with the proxy's ServiceAccount token and alice's Impersonate-* headers, the API server's share of the proxy's cost)")
	t.Logf("impersonation proxy vs direct kube-apiserver (managed profile, same user, HTTP/2, API server, proxy and client on the same 2 cores):\n%s\n\n"+
		"CPU time per request (a server a path does not use shows its idle cost spread over the requests):\n%s\n\nresident memory idle, before the first rows: %s",
		strings.Join(rows, "\n"), strings.Join(cpuRows, "\n"), idleRSS)
}

// headerTransport adds fixed headers to every request.
type headerTransport struct {
	base http.RoundTripper
	h    http.Header
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[k] = v
	}
	return t.base.RoundTrip(r)
}

// proxyLoadAuth is alice's credential for the installation's proxy in the
// load rows: a client certificate from its signer where this test
// installed it (its exchange returns tokens), or whatever its exchange
// returns (another version's, or upstream's, certificate).
func proxyLoadAuth(t *testing.T, in installation, s proxyStrategy, idToken string, alice testbed.DexUser) proxyAuth {
	t.Helper()
	if in.installedHere {
		return certAuth(signerCert(t, in, alice.Email, alice.Groups))
	}
	cred := in.proxyExchange(t, s, idToken)
	if cred.Token != "" {
		return tokenAuth(cred.Token)
	}
	pair, err := tls.X509KeyPair(cred.Cert, cred.Key)
	if err != nil {
		t.Fatalf("%s: the proxy's certificate: %v", in.name, err)
	}
	return certAuth(pair)
}
