// Command oidcop runs a second, independent OpenID provider for the pinniped test bed: the
// example provider of github.com/zitadel/oidc/v3 (a certified OpenID provider library),
// which implements what the bed's Dex does not: token revocation (RFC 7009) beside
// RP-initiated logout (end_session_endpoint), so that `pinniped logout` is proved against a
// real server.
//
// It uses the library's op package and its example in-memory storage as they are. What
// the example lacks is small and kept here: our users and clients from a JSON file (written
// by the test bed), TLS, a fresh token encryption key per start (the example's is a
// constant), and a browser session at the provider, so that a second login in the same
// browser needs no password and RP-initiated logout has something to end. The example's
// login page asks for the password on every login, which would make "the browser's session
// ended" true whether or not logout worked.
package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/text/language"

	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Config is the test bed's configuration of the provider.
type Config struct {
	Issuer  string   `json:"issuer"`  // e.g. https://10.99.0.1:5558 (no trailing slash)
	Listen  string   `json:"listen"`  // host:port
	TLSCert string   `json:"tlsCert"` // PEM file
	TLSKey  string   `json:"tlsKey"`  // PEM file
	Users   []User   `json:"users"`
	Clients []Client `json:"clients"`
}

// User is a password user.
type User struct {
	ID       string `json:"id"`
	Username string `json:"username"`
	Password string `json:"password"` // clear text: the example storage compares it as it is
	Email    string `json:"email"`
}

// Client is a public native client (no secret, PKCE required, refresh tokens with
// offline_access). Its loopback redirect URIs (http://127.0.0.1/callback) match on any port,
// as RFC 8252 7.3 asks and a CLI needs.
type Client struct {
	ID           string   `json:"id"`
	RedirectURIs []string `json:"redirectURIs"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: oidcop CONFIG.json")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "oidcop:", err)
		os.Exit(1)
	}
}

func readConfig(path string) (*Config, error) {
	raw, err := os.ReadFile(path) //nolint:gosec // the bed names its own config file
	if err != nil {
		return nil, err
	}
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	if c.Issuer == "" || c.Listen == "" || c.TLSCert == "" || c.TLSKey == "" {
		return nil, fmt.Errorf("%s: issuer, listen, tlsCert and tlsKey are required", path)
	}
	return &c, nil
}

func run(path string) error {
	c, err := readConfig(path)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	handler, err := newHandler(c, logger)
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
	if err != nil {
		return fmt.Errorf("load TLS key pair: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", c.Listen)
	if err != nil {
		return err
	}
	hs := &http.Server{
		Handler:           handler,
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

// newHandler builds the provider: the library's OP on the example storage, with our login
// page and browser sessions in front.
func newHandler(c *Config, logger *slog.Logger) (http.Handler, error) {
	users := userStore{}
	for _, u := range c.Users {
		users[u.ID] = &storage.User{
			ID: u.ID, Username: u.Username, Password: u.Password,
			Email: u.Email, EmailVerified: u.Email != "",
			FirstName: u.Username, PreferredLanguage: language.English,
		}
	}
	clients := map[string]*storage.Client{}
	for _, cl := range c.Clients {
		if len(cl.RedirectURIs) == 0 {
			// NativeClient would fall back to the example's own redirect URIs.
			return nil, fmt.Errorf("client %q: redirectURIs are required", cl.ID)
		}
		clients[cl.ID] = storage.NativeClient(cl.ID, cl.RedirectURIs...)
	}
	st := &store{Storage: storage.NewStorageWithClients(users, clients), users: users, sessions: newSessions()}

	// The key encrypts opaque access tokens; the example's is a constant.
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return nil, err
	}
	provider, err := op.NewProvider(&op.Config{
		CryptoKey:                key,
		DefaultLogoutRedirectURI: pathLoggedOut,
		CodeMethodS256:           true,
		AuthMethodPost:           true,
		GrantTypeRefreshToken:    true,
		SupportedUILocales:       []language.Tag{language.English},
	}, st, op.StaticIssuer(c.Issuer), op.WithLogger(logger))
	if err != nil {
		return nil, fmt.Errorf("build provider: %w", err)
	}

	mux := http.NewServeMux()
	l := &login{store: st, callback: op.AuthCallbackURL(provider)}
	interceptor := op.NewIssuerInterceptor(provider.IssuerFromRequest)
	mux.Handle(pathLogin, interceptor.HandlerFunc(l.ServeHTTP))
	mux.HandleFunc(pathLoggedOut, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(`<!DOCTYPE html><html><body><h1 id="logged-out">Signed out</h1></body></html>`))
	})
	mux.Handle("/", provider)
	return logRequests(logger, oneAtATime(mux)), nil
}

// oneAtATime serves one request at a time: the example storage reads its refresh-token map
// without its lock when a token is revoked, and a map read during a write is a fatal error
// that would take the bed's provider down mid-test. A test provider loses nothing by it.
func oneAtATime(next http.Handler) http.Handler {
	var mu sync.Mutex
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// logRequests logs method, path and status, never the query (codes, tokens, hints).
func logRequests(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		start := time.Now()
		next.ServeHTTP(rec, r)
		logger.Info("request", "method", r.Method, "path", r.URL.Path, "status", rec.status, "duration", time.Since(start).Round(time.Millisecond))
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// userStore is storage.UserStore over our users.
type userStore map[string]*storage.User

func (u userStore) GetUserByID(id string) *storage.User { return u[id] }

func (u userStore) GetUserByUsername(username string) *storage.User {
	for _, user := range u {
		if user.Username == username {
			return user
		}
	}
	return nil
}

// ExampleClientID names the example's JWT-profile service user; we register none.
func (u userStore) ExampleClientID() string { return "" }

// store is the example storage, whose end of a session (RP-initiated logout) also ends the
// user's browser sessions here.
type store struct {
	*storage.Storage
	users    userStore
	sessions *sessions
}

// TerminateSession is called by end_session with the subject of the ID token hint: the
// example removes that user's tokens for the client; the browser sessions go too, so the
// next login asks for the password again.
func (s *store) TerminateSession(ctx context.Context, userID, clientID string) error {
	if userID != "" {
		s.sessions.endUser(userID)
	}
	return s.Storage.TerminateSession(ctx, userID, clientID)
}
