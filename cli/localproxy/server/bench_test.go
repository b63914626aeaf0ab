package server_test

import (
	"io"
	"net/http"
	"slices"
	"testing"
	"time"
)

// BenchmarkProxy measures what the local proxy adds to a request on
// loopback: the same GET and a LIST-sized response, directly to the API
// server with the generation's certificate and through the proxy, both
// over HTTP/2 and TLS. p50-ns is the median; the proxy's cost is the
// difference between the proxy and direct figures (the target is under
// 0.3 ms at p50).
func BenchmarkProxy(b *testing.B) {
	api := newAPIServer(b)
	p := newLocalProxy(b, api, nil)
	g := api.certGen(b, "alice", 1)
	p.holder.Swap(g)
	direct := &http.Client{Transport: g.RoundTripper(false)}
	for _, c := range []struct{ name, path string }{
		{"get", "/api/v1/namespaces/default"},
		{"list-1MiB", "/list?bytes=1048576"},
	} {
		for _, via := range []struct {
			name   string
			client *http.Client
			base   string
			auth   bool
		}{
			{"direct", direct, api.URL, false},
			{"proxy", p.Client(), p.URL + "/ctx/" + slug, true},
		} {
			b.Run(c.name+"/"+via.name, func(b *testing.B) {
				req, err := http.NewRequest(http.MethodGet, via.base+c.path, nil)
				if err != nil {
					b.Fatal(err)
				}
				if via.auth {
					req.Header.Set("Authorization", "Bearer "+secret)
				}
				took := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for range b.N {
					start := time.Now()
					resp, err := via.client.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Fatalf("status %d", resp.StatusCode)
					}
					took = append(took, time.Since(start))
				}
				b.StopTimer()
				slices.Sort(took)
				b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
			})
		}
	}
}
