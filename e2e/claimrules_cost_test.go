//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// TestClaimRulesCost measures what kube-apiserver's claim rules cost the
// agent: its pods' resident memory before any CEL expression exists (the
// CEL environment is built on first use) and after an authenticator with
// expressions is compiled, and the agent's CPU per exchange for the same
// user through the upstream form (spec.claims: claim names) and through
// CEL rules (a nested claim mapped to groups and the UID, a validation
// rule), in alternating rounds so the machine's other work biases neither.
func TestClaimRulesCost(t *testing.T) {
	if os.Getenv("PINNIPED_E2E_LOAD") == "" {
		t.Skip("a benchmark: run with PINNIPED_E2E_LOAD=1 (make bench-claimrules)")
	}
	installAgent(t)
	in := ourInstall
	time.Sleep(20 * time.Second) // let start-up garbage be collected
	before := podServer(t, in.name, in.namespace, in.selector).rssText()

	ca, err := os.ReadFile(Bed.Config().TestbedCAFile())
	if err != nil {
		t.Fatal(err)
	}
	applyClaimRules(t, ca, "")
	t.Cleanup(func() { _, _ = RunE(nil, "kubectl", "delete", "jwtauthenticator", "dex-rules", "--ignore-not-found") })
	waitPhase(t, "jwtauthenticator", "dex-rules", "Ready")
	time.Sleep(20 * time.Second)
	servers := podServer(t, in.name, in.namespace, in.selector)
	compiled := servers.rssText()

	token := federatedIDToken(t, testbed.DexUsers[0])
	type target struct {
		label, url string
		body       []byte
		client     *http.Client
	}
	var targets []target
	for _, a := range []struct{ label, name string }{
		{"spec.claims (claim names)", "dex"},
		{"claim rules (CEL: nested groups, uid, a validation rule)", "dex-rules"},
	} {
		in := ourInstall
		in.authenticator = a.name
		url, body, tlsConfig := in.exchangeRequest(t, token)
		c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig, MaxIdleConnsPerHost: 16}}
		t.Cleanup(c.CloseIdleConnections)
		targets = append(targets, target{a.label, url, body, c})
	}
	post := func(tg target) (time.Duration, error) { return postExchange(tg.client, tg.url, tg.body) }
	for _, tg := range targets {
		for range 50 { // warm up connections and key caches
			if _, err := post(tg); err != nil {
				t.Fatal(err)
			}
		}
	}
	cpu := make([]time.Duration, len(targets))
	n := make([]int, len(targets))
	best := make([]loadResult, len(targets))
	for _, order := range [][]int{{0, 1}, {1, 0}, {0, 1}, {1, 0}} {
		for _, i := range order {
			c0 := mustCPU(t, servers)
			r := runLoad(t, 8, 1500, func() (time.Duration, error) { return post(targets[i]) })
			cpu[i] += mustCPU(t, servers) - c0
			n[i] += r.n
			if r.rps > best[i].rps {
				best[i] = r
			}
		}
	}
	rows := []string{"| authenticator | exchanges | req/s (best round) | p50 | the agent's CPU µs/exchange |", "|---|---|---|---|---|"}
	for i, tg := range targets {
		rows = append(rows, fmt.Sprintf("| %s | %d | %.0f | %v | %s |", tg.label, n[i], best[i].rps, best[i].p50.Round(10*time.Microsecond), microsPer(servers, cpu[i], n[i])))
	}
	t.Logf("claim rules' cost (%s profile, cluster CA %s, kept-alive connections, concurrency 8, through kube-apiserver):\n%s\n\n"+
		"resident memory of the agent's pods (one figure per pod):\n| when | RSS |\n|---|---|\n| idle, no CEL expression anywhere | %s |\n| idle, an authenticator's rules compiled | %s |\n| after the load | %s |",
		Bed.Config().Profile, clusterCAKey(t), strings.Join(rows, "\n"), before, compiled, servers.rssText())
}
