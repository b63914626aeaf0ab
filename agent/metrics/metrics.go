// Package metrics defines the agent's Prometheus metrics and its audit line.
package metrics

import (
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pinniped-kit/pinniped/agent/exchange"
)

// Exchange records exchange outcomes and latency, and writes one audit line
// per exchange. Usernames and groups are personal data, so they are logged
// only when LogIdentities is set.
type Exchange struct {
	registry      *prometheus.Registry
	total         *prometheus.CounterVec
	latency       prometheus.Histogram
	audit         *slog.Logger
	logIdentities bool
}

// New registers the metrics in a fresh registry.
func New(audit *slog.Logger, logIdentities bool) *Exchange {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	e := &Exchange{
		registry: reg,
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pinniped_token_exchanges_total",
			Help: "TokenCredentialRequests handled, by result (success or failure).",
		}, []string{"result"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pinniped_token_exchange_duration_seconds",
			Help:    "Time to validate a token and issue a credential.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10},
		}),
		audit:         audit,
		logIdentities: logIdentities,
	}
	reg.MustRegister(e.total, e.latency)
	return e
}

// Observe is the exchange handler's callback.
func (e *Exchange) Observe(r exchange.Result) {
	result := "failure"
	if r.Success {
		result = "success"
	}
	e.total.WithLabelValues(result).Inc()
	e.latency.Observe(r.Duration.Seconds())
	attrs := []any{"auditEvent", true, "verb", "create", "resource", "tokencredentialrequests",
		"result", result, "authenticator", r.Authenticator, "tokenSHA256", r.TokenHash, "durationMs", r.Duration.Milliseconds()}
	if e.logIdentities && r.Success {
		attrs = append(attrs, "username", r.Username, "groups", r.Groups)
	}
	e.audit.Info("token exchange", attrs...)
}

// Handler serves /metrics.
func (e *Exchange) Handler() http.Handler {
	return promhttp.HandlerFor(e.registry, promhttp.HandlerOpts{})
}
