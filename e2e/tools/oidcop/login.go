package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"html/template"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/zitadel/oidc/v3/example/server/storage"
)

const (
	// pathLogin is where the example's clients send the browser (storage.NativeClient's
	// login URL: /login/username?authRequestID=<id>).
	pathLogin     = "/login/username"
	pathLoggedOut = "/logged-out"

	sessionCookie = "oidcop_session"
	sessionTTL    = 8 * time.Hour
)

// The element IDs are what the e2e tests fill in.
var loginPage = template.Must(template.New("login").Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Log in</title></head>
<body>
<h1>Log in to the test bed's OpenID provider</h1>
{{if .Error}}<p id="error">{{.Error}}</p>{{end}}
<form method="POST" action="/login/username">
<input type="hidden" name="id" value="{{.ID}}">
<label for="username">Username</label> <input id="username" name="username" autocomplete="username">
<label for="password">Password</label> <input id="password" name="password" type="password" autocomplete="current-password">
<button id="submit" type="submit">Log in</button>
</form>
</body></html>
`))

type login struct {
	store    *store
	callback func(context.Context, string) string
}

func (l *login) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "cannot parse the form", http.StatusBadRequest)
		return
	}
	switch r.Method {
	case http.MethodGet:
		id := r.Form.Get("authRequestID")
		if l.loggedInAlready(r, id) {
			http.Redirect(w, r, l.callback(r.Context(), id), http.StatusFound)
			return
		}
		render(w, id, "")
	case http.MethodPost:
		id := r.PostForm.Get("id")
		username, password := r.PostForm.Get("username"), r.PostForm.Get("password")
		if err := l.store.CheckUsernamePassword(username, password, id); err != nil {
			render(w, id, "Wrong username or password.")
			return
		}
		l.startSession(w, username)
		http.Redirect(w, r, l.callback(r.Context(), id), http.StatusFound)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func render(w http.ResponseWriter, id, errMsg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = loginPage.Execute(w, struct{ ID, Error string }{id, errMsg})
}

// loggedInAlready completes the authorization request for the browser's session, if it has
// a live one and the client did not ask for a fresh login.
func (l *login) loggedInAlready(r *http.Request, id string) bool {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return false
	}
	userID, ok := l.store.sessions.user(ck.Value)
	if !ok {
		return false
	}
	req, err := l.store.AuthRequestByID(r.Context(), id)
	if err != nil {
		return false
	}
	if ar, ok := req.(*storage.AuthRequest); !ok || slices.Contains(ar.Prompt, "login") || slices.Contains(ar.Prompt, "select_account") {
		return false
	}
	user := l.store.users.GetUserByID(userID)
	if user == nil {
		return false
	}
	// The example storage completes a request only through its password check; the
	// session stands for that check having passed for this user.
	return l.store.CheckUsernamePassword(user.Username, user.Password, id) == nil
}

func (l *login) startSession(w http.ResponseWriter, username string) {
	user := l.store.users.GetUserByUsername(username)
	if user == nil {
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: l.store.sessions.start(user.ID), Path: "/",
		HttpOnly: true, Secure: true, SameSite: http.SameSiteLaxMode, MaxAge: int(sessionTTL / time.Second),
	})
}

// sessions are the provider's browser sessions: cookie value -> user.
type sessions struct {
	mu   sync.Mutex
	byID map[string]session
}

type session struct {
	userID  string
	expires time.Time
}

func newSessions() *sessions { return &sessions{byID: map[string]session{}} }

func (s *sessions) start(userID string) string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read does not fail (Go 1.24+)
	id := base64.RawURLEncoding.EncodeToString(b)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byID[id] = session{userID: userID, expires: time.Now().Add(sessionTTL)}
	return id
}

func (s *sessions) user(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.byID[id]
	if !ok || time.Now().After(sess.expires) {
		delete(s.byID, id)
		return "", false
	}
	return sess.userID, true
}

func (s *sessions) endUser(userID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, sess := range s.byID {
		if sess.userID == userID {
			delete(s.byID, id)
		}
	}
}
