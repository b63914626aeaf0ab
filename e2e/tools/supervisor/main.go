// Command supervisor is a test double of upstream Pinniped's Supervisor for the e2e test
// bed: one FederationDomain with two identity providers, both backed by the bed's Dex, that
// speaks the Supervisor's protocol to the pinniped CLI (see README.md). The product never
// uses it.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "supervisor:", err)
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type options struct {
	listen, issuer, tlsCert, tlsKey                  string
	upstreamIssuer, upstreamCA                       string
	upstreamClientID, upstreamSecretFile             string
	upstreamPasswordClientID                         string
	idTokenLifetime, accessTokenLifetime, refreshTTL time.Duration
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	var o options
	fs := flag.NewFlagSet("supervisor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	required := map[string]*string{
		"listen":                      &o.listen,
		"issuer":                      &o.issuer,
		"tls-cert":                    &o.tlsCert,
		"tls-key":                     &o.tlsKey,
		"upstream-issuer":             &o.upstreamIssuer,
		"upstream-ca":                 &o.upstreamCA,
		"upstream-client-id":          &o.upstreamClientID,
		"upstream-client-secret-file": &o.upstreamSecretFile,
		"upstream-password-client-id": &o.upstreamPasswordClientID,
	}
	usage := map[string]string{
		"listen":                      "ADDR:PORT to serve HTTPS on",
		"issuer":                      "the issuer URL, https://HOST:PORT[/PATH]",
		"tls-cert":                    "PEM serving certificate file",
		"tls-key":                     "PEM serving key file",
		"upstream-issuer":             "the upstream OIDC provider's issuer URL (the bed's Dex)",
		"upstream-ca":                 "PEM CA bundle file the upstream's certificate is checked against",
		"upstream-client-id":          "confidential client at the upstream for browser logins",
		"upstream-client-secret-file": "file holding that client's secret",
		"upstream-password-client-id": "public client at the upstream for its password grant (cli_password)",
	}
	for name, p := range required {
		fs.StringVar(p, name, "", usage[name])
	}
	fs.DurationVar(&o.idTokenLifetime, "id-token-lifetime", 2*time.Minute, "lifetime of ID tokens, also of exchanged (RFC 8693) tokens")
	fs.DurationVar(&o.accessTokenLifetime, "access-token-lifetime", 2*time.Minute, "lifetime of access tokens")
	fs.DurationVar(&o.refreshTTL, "refresh-token-lifetime", 9*time.Hour, "lifetime of refresh tokens")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	var missing []string
	fs.VisitAll(func(f *flag.Flag) {
		if p, ok := required[f.Name]; ok && *p == "" {
			missing = append(missing, "--"+f.Name)
		}
	})
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing required flags: %s", strings.Join(missing, ", "))
	}
	for name, d := range map[string]time.Duration{"id-token-lifetime": o.idTokenLifetime, "access-token-lifetime": o.accessTokenLifetime, "refresh-token-lifetime": o.refreshTTL} {
		if d <= 0 {
			return nil, fmt.Errorf("--%s must be positive", name)
		}
	}
	return &o, nil
}

// run serves until ctx ends (SIGTERM in main), then shuts down cleanly.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
	if err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	caPEM, err := os.ReadFile(o.upstreamCA)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("%s holds no PEM certificate", o.upstreamCA)
	}
	secret, err := os.ReadFile(o.upstreamSecretFile)
	if err != nil {
		return err
	}
	upstreamClient := &http.Client{
		Timeout: 30 * time.Second,
		// Direct, never through a proxy from the environment: Dex is on the bed's own network.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}},
	}
	offset, err := clockOffset(os.Getenv(ClockOffsetEnv))
	if err != nil {
		return err
	}
	if offset != 0 {
		fmt.Fprintf(stderr, "supervisor: clock offset %s: ID tokens' times read this machine's clock %+v\n", offset, offset)
	}
	if o.accessTokenLifetime, err = accessTokenLifetime(os.Getenv(AccessTokenLifetimeEnv), o.accessTokenLifetime); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "supervisor: access tokens live %s\n", o.accessTokenLifetime)
	handler, err := New(Config{
		Issuer: o.issuer,
		Upstream: UpstreamConfig{
			Issuer:           o.upstreamIssuer,
			HTTPClient:       upstreamClient,
			ClientID:         o.upstreamClientID,
			ClientSecret:     strings.TrimSpace(string(secret)),
			PasswordClientID: o.upstreamPasswordClientID,
		},
		IDTokenLifetime:      o.idTokenLifetime,
		AccessTokenLifetime:  o.accessTokenLifetime,
		RefreshTokenLifetime: o.refreshTTL,
		ClockOffset:          offset,
		Log:                  stderr,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           handler,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(stderr, "supervisor: ", log.LstdFlags),
	}
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(ln, "", "") }()
	fmt.Fprintf(stderr, "supervisor: serving %s on %s\n", o.issuer, ln.Addr())
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ClockOffsetEnv, when set to a duration such as 2m or -2m, makes the
// Supervisor sign ID tokens as if its clock were that far ahead (behind) of
// the machine's; e2e tests use it to play clock skew between the Supervisor
// and the agent. An environment variable rather than a flag, so a test can
// start the bed's Supervisor again with it for one run.
const ClockOffsetEnv = "PINNIPED_E2E_SUPERVISOR_CLOCK_OFFSET"

// AccessTokenLifetimeEnv, when set to a duration, replaces
// --access-token-lifetime for one run: a test that waits for an access token
// to expire starts the bed's Supervisor again with a short one.
const AccessTokenLifetimeEnv = "PINNIPED_E2E_SUPERVISOR_ACCESS_TOKEN_LIFETIME"

func accessTokenLifetime(v string, flagged time.Duration) (time.Duration, error) {
	if v == "" {
		return flagged, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Second {
		return 0, fmt.Errorf("%s=%q: want a duration of a second or more, such as 40s", AccessTokenLifetimeEnv, v)
	}
	return d, nil
}

func clockOffset(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d%time.Second != 0 {
		return 0, fmt.Errorf("%s=%q: want whole seconds, such as 2m or -2m", ClockOffsetEnv, v)
	}
	return d, nil
}
