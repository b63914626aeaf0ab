// Package execcred speaks kubectl's exec credential plugin protocol: it reads
// KUBERNETES_EXEC_INFO and writes an ExecCredential in the version kubectl
// asked for (client.authentication.k8s.io/v1 or v1beta1).
package execcred

import (
	"fmt"
	"io"
	"time"

	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cli/login/config"
)

// The API versions kubectl understands.
const (
	V1      = "client.authentication.k8s.io/v1"
	V1beta1 = "client.authentication.k8s.io/v1beta1"
)

// EnvVar is where kubectl passes the request.
const EnvVar = "KUBERNETES_EXEC_INFO"

// RenewAhead is how much earlier than a credential really expires kubectl
// is told it does. client-go uses a credential until the time it was told
// and only then asks the plugin again; a call sent just before a
// certificate's NotAfter reaches the API server just after it, is refused
// (401), and client-go does not retry it. A client open all day (k9s, an
// IDE, a watch) would see such a failed call at some renewals. Told 20 s
// early, client-go asks again while the credential still works, and gets a
// new one: the credential cache hands out none with less than
// credcache.DefaultSkew (30 s) left, which must stay longer than this.
const RenewAhead = 20 * time.Second

// minTold: a credential with less life than this left after RenewAhead is
// told as it is, so that client-go is never handed one it takes as already
// expired, and runs the plugin again for every call (a fresh credential has
// that little left only when the issuer's clock is far behind).
const minTold = 10 * time.Second

// KubectlExpiry is the expiry kubectl is told for a credential that really
// ends at exp, at now: RenewAhead earlier, when that leaves it some life.
// A zero exp (no expiry) stays zero.
func KubectlExpiry(exp, now time.Time) time.Time {
	if exp.IsZero() {
		return exp
	}
	if told := exp.Add(-RenewAhead); told.Sub(now) >= minTold {
		return told
	}
	return exp
}

// Cluster is what kubectl says about the cluster (provideClusterInfo: true).
type Cluster struct {
	Server                   string `json:"server,omitempty"`
	CertificateAuthorityData []byte `json:"certificate-authority-data,omitempty"`
}

// Request is the parsed KUBERNETES_EXEC_INFO.
type Request struct {
	APIVersion string
	// Interactive is false when kubectl has no terminal to offer (e.g. an
	// IDE or a CI job): no prompts, no browser.
	Interactive bool
	Cluster     *Cluster
}

// ParseRequest parses KUBERNETES_EXEC_INFO. When kubectl did not set it
// (someone ran `pinniped login` by hand) it assumes v1 and an interactive
// session; a malformed value is an error, since guessing could print a
// credential kubectl then rejects.
func ParseRequest(env string) (*Request, error) {
	if env == "" {
		return &Request{APIVersion: V1, Interactive: true}, nil
	}
	raw, err := decodeRequest(env)
	if err != nil {
		return nil, fmt.Errorf("%s is not valid JSON: %w", EnvVar, err)
	}
	if raw.Kind != "" && raw.Kind != "ExecCredential" {
		return nil, fmt.Errorf("%s has kind %q, want ExecCredential", EnvVar, raw.Kind)
	}
	req := &Request{APIVersion: raw.APIVersion, Cluster: raw.Cluster}
	switch raw.APIVersion {
	case V1:
		// v1 always says whether a person is there.
		req.Interactive = raw.Interactive != nil && *raw.Interactive
	case V1beta1:
		// v1beta1 may omit it; older kubectls meant "yes" by omission.
		req.Interactive = raw.Interactive == nil || *raw.Interactive
	case "":
		return nil, fmt.Errorf("%s has no apiVersion", EnvVar)
	default:
		return nil, fmt.Errorf("%s asks for %s; this pinniped speaks %s and %s (upgrade pinniped?)", EnvVar, raw.APIVersion, V1, V1beta1)
	}
	return req, nil
}

// Status is the credential part of an ExecCredential.
type Status struct {
	ExpirationTimestamp   *time.Time `json:"expirationTimestamp,omitempty"`
	Token                 string     `json:"token,omitempty"`
	ClientCertificateData string     `json:"clientCertificateData,omitempty"`
	ClientKeyData         string     `json:"clientKeyData,omitempty"`
}

// StatusOf is what kubectl is given of a cached or new credential at now:
// its secrets, and the expiry KubectlExpiry makes of its own. The front's
// cache hit and the engine's login both answer with it.
func StatusOf(c credcache.Credential, now time.Time) Status {
	exp := KubectlExpiry(c.ExpirationTimestamp, now)
	return Status{ExpirationTimestamp: &exp, Token: c.Token, ClientCertificateData: c.ClientCertificateData, ClientKeyData: c.ClientKeyData}
}

// Write prints the ExecCredential kubectl asked for (its expiry as
// KubectlExpiry makes it). Only this may ever go to stdout.
func Write(w io.Writer, apiVersion string, s Status) error {
	if s.ExpirationTimestamp != nil {
		t := s.ExpirationTimestamp.UTC().Truncate(time.Second)
		s.ExpirationTimestamp = &t
	}
	b, err := appendCredential(make([]byte, 0, 256+len(s.Token)+len(s.ClientCertificateData)+len(s.ClientKeyData)), apiVersion, s)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// KeyCluster is the cluster a cache key is made for ({} when kubectl said
// nothing about it).
func (r *Request) KeyCluster() config.Cluster {
	if r == nil || r.Cluster == nil {
		return config.Cluster{}
	}
	return config.Cluster{Server: r.Cluster.Server, CA: r.Cluster.CertificateAuthorityData}
}
