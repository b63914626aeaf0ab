// Package metrics defines the agent's Prometheus metrics and its audit line.
package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pinniped-kit/pinniped/agent/plumbing/observe"
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

	proxyTotal   *prometheus.CounterVec
	proxyLatency *prometheus.HistogramVec
	// ProxyAudit says which proxied requests get an audit line.
	ProxyAudit ProxyAuditLevel
}

// ProxyAuditLevel selects the proxied requests that are audited.
type ProxyAuditLevel string

// Audit levels for the impersonation proxy.
const (
	// ProxyAuditAll writes a line for every request.
	ProxyAuditAll ProxyAuditLevel = "all"
	// ProxyAuditChanges skips successful reads (GET, HEAD, OPTIONS that
	// are not upgrades): what changed, what ran (exec, port-forward) and
	// what was refused is still audited.
	ProxyAuditChanges ProxyAuditLevel = "changes"
	// ProxyAuditNone writes no lines; metrics still count every request.
	ProxyAuditNone ProxyAuditLevel = "none"
)

// ParseProxyAuditLevel checks a --proxy-audit value.
func ParseProxyAuditLevel(s string) (ProxyAuditLevel, error) {
	switch l := ProxyAuditLevel(s); l {
	case ProxyAuditAll, ProxyAuditChanges, ProxyAuditNone:
		return l, nil
	}
	return "", fmt.Errorf("--proxy-audit %q: use all, changes or none", s)
}

func (l ProxyAuditLevel) wants(o observe.ProxyRequest) bool {
	switch l {
	case ProxyAuditNone:
		return false
	case ProxyAuditChanges:
		read := o.Verb == http.MethodGet || o.Verb == http.MethodHead || o.Verb == http.MethodOptions
		return !read || o.Upgrade != "" || o.Code == http.StatusUnauthorized || o.Code == http.StatusForbidden
	}
	return true
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
		proxyTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pinniped_impersonation_proxy_requests_total",
			Help: "Requests through the impersonation proxy, by how the client authenticated and the HTTP status code.",
		}, []string{"authentication", "code"}),
		proxyLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pinniped_impersonation_proxy_request_duration_seconds",
			Help:    "Time to answer a proxied request (for watches and upgrades: how long they were open).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10, 60, 600},
		}, []string{"authentication"}),
	}
	reg.MustRegister(e.total, e.latency, e.proxyTotal, e.proxyLatency)
	return e
}

// Observe is the exchange handler's callback.
func (e *Exchange) Observe(r observe.Exchange) {
	result := "failure"
	if r.Success {
		result = "success"
	}
	e.total.WithLabelValues(result).Inc()
	e.latency.Observe(r.Duration.Seconds())
	attrs := []any{"auditEvent", true, "verb", "create", "resource", "tokencredentialrequests",
		"result", result, "authenticator", r.Authenticator, "tokenSHA256", r.TokenHash, "durationMs", r.Duration.Milliseconds()}
	if r.CredentialID != "" {
		// Not the credential itself: the ID the API server's audit log
		// shows for every request made with it.
		attrs = append(attrs, "credentialID", r.CredentialID)
	}
	if e.logIdentities && r.Success {
		attrs = append(attrs, "username", r.Username, "groups", r.Groups)
	}
	e.audit.Info("token exchange", attrs...)
}

// Handler serves /metrics.
func (e *Exchange) Handler() http.Handler {
	return promhttp.HandlerFor(e.registry, promhttp.HandlerOpts{})
}

// ObserveProxy is the impersonation proxy's callback: metrics and an audit
// line per request. Request paths are logged (they name resources, not
// people); who made the request only when identities are opted in.
func (e *Exchange) ObserveProxy(o observe.ProxyRequest) {
	e.proxyTotal.WithLabelValues(string(o.Method), strconv.Itoa(o.Code)).Inc()
	e.proxyLatency.WithLabelValues(string(o.Method)).Observe(o.Duration.Seconds())
	if !e.ProxyAudit.wants(o) {
		return
	}
	// Typed attributes in a fixed array: this runs for every proxied
	// request, and the []any form boxed each value.
	attrs := [10]slog.Attr{slog.Bool("auditEvent", true), slog.Bool("proxy", true), slog.String("method", o.Verb),
		slog.String("path", o.Path), slog.Int("code", o.Code), slog.String("authentication", string(o.Method)),
		slog.String("upgrade", o.Upgrade), slog.Int64("durationMs", o.Duration.Milliseconds())}
	n := 8
	if e.logIdentities && o.Username != "" {
		attrs[n] = slog.String("username", o.Username)
		n++
		if o.ImpersonatedUser != "" {
			attrs[n] = slog.String("impersonatedUser", o.ImpersonatedUser)
			n++
		}
	}
	e.audit.LogAttrs(context.Background(), slog.LevelInfo, "impersonation proxy request", attrs[:n]...)
}
