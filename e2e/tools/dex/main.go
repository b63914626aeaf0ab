// Command dex runs a Dex OpenID Connect provider for the pinniped test bed.
//
// Dex's own cmd/dex cannot be built as a dependency from the module proxy (its gRPC admin
// API needs a newer github.com/dexidp/dex/api/v2 than the proxy serves), so this main builds
// the server from Dex's server and storage packages and leaves the gRPC API out.
//
// The configuration is a small JSON file of our own (see Config), written by the test bed.
// Storage is always etcd: with memory and sqlite3 storage a refresh_token grant deadlocks
// /token in this Dex version.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	gosundheit "github.com/AppsFlyer/go-sundheit"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"

	"github.com/dexidp/dex/server"
	"github.com/dexidp/dex/server/connectors"
	"github.com/dexidp/dex/server/signer"
	"github.com/dexidp/dex/server/tokens"
	"github.com/dexidp/dex/storage"
	"github.com/dexidp/dex/storage/etcd"
)

// Config is the test bed's Dex configuration.
type Config struct {
	Issuer        string   `json:"issuer"`        // e.g. https://10.99.0.1:5556 (no path: device flow needs that)
	Listen        string   `json:"listen"`        // host:port
	TLSCert       string   `json:"tlsCert"`       // PEM file
	TLSKey        string   `json:"tlsKey"`        // PEM file
	EtcdEndpoints []string `json:"etcdEndpoints"` // e.g. http://127.0.0.1:2379
	EtcdNamespace string   `json:"etcdNamespace"` // key prefix, e.g. "dex/"
	Users         []User   `json:"users"`
	Clients       []Client `json:"clients"`
	IDTokenTTL    string   `json:"idTokenTTL"` // Go duration, default 10m
}

// User is a static password user.
type User struct {
	Email    string   `json:"email"`
	Username string   `json:"username"`
	UserID   string   `json:"userID"`
	Password string   `json:"password"` // clear text; hashed at start-up
	Groups   []string `json:"groups"`
}

// Client is a static OAuth2 client. A public client with no redirect URIs accepts any
// loopback redirect (http://127.0.0.1:<port>/...), which is what a CLI needs.
type Client struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	Secret       string   `json:"secret"`
	Public       bool     `json:"public"`
	RedirectURIs []string `json:"redirectURIs"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: dex CONFIG.json")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "dex:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))

	idTTL := 10 * time.Minute
	if c.IDTokenTTL != "" {
		if idTTL, err = time.ParseDuration(c.IDTokenTTL); err != nil {
			return fmt.Errorf("idTokenTTL: %w", err)
		}
	}

	s, err := openStorage(c, logger)
	if err != nil {
		return err
	}

	now := func() time.Time { return time.Now().UTC() }
	local := signer.LocalConfig{KeysRotationPeriod: "6h"}
	sig, err := local.Open(context.Background(), s, idTTL, now, logger)
	if err != nil {
		return fmt.Errorf("open signer: %w", err)
	}

	// Without a policy Dex's refresh handler dereferences nil. Defaults: rotation on, no
	// idle or absolute expiry.
	refreshPolicy, err := tokens.NewRefreshTokenPolicy(logger, false, "", "", "")
	if err != nil {
		return fmt.Errorf("refresh token policy: %w", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	srv, err := server.NewServer(ctx, server.Config{
		Issuer:             c.Issuer,
		Storage:            s,
		SkipApprovalScreen: true,
		PasswordConnector:  connectors.LocalConnector, // enables the password grant
		IDTokensValidFor:   idTTL,
		RefreshTokenPolicy: refreshPolicy,
		Now:                now,
		Logger:             logger,
		Signer:             sig,
		PrometheusRegistry: prometheus.NewRegistry(),
		// Without a health checker Dex's /healthz handler crashes.
		HealthChecker: gosundheit.New(),
	})
	if err != nil {
		return fmt.Errorf("build server: %w", err)
	}

	return serve(ctx, c, srv, logger)
}

// openStorage is Dex's etcd storage with the bed's static clients, users
// (passwords hashed here) and the local password connector.
func openStorage(c Config, logger *slog.Logger) (storage.Storage, error) {
	etcdCfg := etcd.Etcd{Endpoints: c.EtcdEndpoints, Namespace: c.EtcdNamespace}
	s, err := etcdCfg.Open(logger)
	if err != nil {
		return nil, fmt.Errorf("open etcd storage %v: %w", c.EtcdEndpoints, err)
	}

	clients := make([]storage.Client, 0, len(c.Clients))
	for _, cl := range c.Clients {
		clients = append(clients, storage.Client{ID: cl.ID, Name: cl.Name, Secret: cl.Secret, Public: cl.Public, RedirectURIs: cl.RedirectURIs})
	}
	s = storage.WithStaticClients(s, clients)

	passwords := make([]storage.Password, 0, len(c.Users))
	for _, u := range c.Users {
		// Cost 10 is bcrypt's minimum that Dex accepts; tests log in many times.
		hash, err := bcrypt.GenerateFromPassword([]byte(u.Password), 10)
		if err != nil {
			return nil, err
		}
		passwords = append(passwords, storage.Password{
			Email: u.Email, Username: u.Username, PreferredUsername: u.Username,
			UserID: u.UserID, Hash: hash, Groups: u.Groups,
		})
	}
	s = storage.WithStaticPasswords(s, passwords, logger)
	s = storage.WithStaticConnectors(s, []storage.Connector{{ID: connectors.LocalConnector, Name: "Email", Type: connectors.LocalConnector}})

	return s, nil
}

// serve serves Dex over TLS at c.Listen until ctx ends.
func serve(ctx context.Context, c Config, srv http.Handler, logger *slog.Logger) error {
	cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
	if err != nil {
		return fmt.Errorf("load TLS key pair: %w", err)
	}
	l, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return err
	}
	hs := &http.Server{
		Handler:           srv,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	logger.Info("listening", "address", c.Listen, "issuer", c.Issuer)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	if err := hs.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
