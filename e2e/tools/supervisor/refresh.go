package main

import (
	"context"
	"net/http"
	"slices"
	"sync"

	"github.com/ory/fosite"
	"github.com/ory/fosite/handler/openid"
)

// upstreamLogin is what a refresh needs of the login it continues: the identity provider, the
// identity given, and the upstream grant to check it again with. Upstream keeps this in
// the session's storage; here it is a map by the login's request ID, as fosite's memory
// store keeps the rest.
type upstreamLogin struct {
	idp      *idp
	identity identity
}

type upstreamLogins struct {
	mu sync.Mutex
	m  map[string]*upstreamLogin
}

func (l *upstreamLogins) put(requestID string, v *upstreamLogin) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[requestID] = v
}

func (l *upstreamLogins) get(requestID string) *upstreamLogin {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[requestID]
}

// errUpstreamRefresh is upstream's answer when the user no longer checks out at the
// upstream: 401, error "error", "Error during upstream refresh." with a hint. The CLI then
// logs in again.
func errUpstreamRefresh() *fosite.RFC6749Error {
	return (&fosite.RFC6749Error{
		ErrorField:       "error",
		DescriptionField: "Error during upstream refresh.",
		CodeField:        http.StatusUnauthorized,
	}).WithHint("Upstream refresh failed.")
}

// refreshUpstream checks a refresh's user again at the upstream before fosite rotates
// anything, as upstream does: Dex must still honour the login's refresh token and give the
// same subject and username. The groups are the upstream's new ones, in the new ID token
// when the login was granted the groups scope. The rotated upstream token is kept.
func (s *Server) refreshUpstream(ctx context.Context, ar fosite.AccessRequester) *fosite.RFC6749Error {
	l := s.logins.get(ar.GetID())
	if l == nil {
		return errUpstreamRefresh().WithDebug("no upstream grant for this login")
	}
	claims, err := s.upstream.refresh(ctx, l.identity.upstream)
	if err != nil {
		return errUpstreamRefresh().WithDebug(describeUpstreamError(err))
	}
	id, err := l.idp.identity(claims)
	if err != nil {
		return errUpstreamRefresh().WithDebug(err.Error())
	}
	if id.subject != l.identity.subject {
		return errUpstreamRefresh().WithDebug("the upstream's subject changed")
	}
	if id.username != l.identity.username {
		return errUpstreamRefresh().WithDebug("the upstream's username changed")
	}
	s.logins.put(ar.GetID(), &upstreamLogin{idp: l.idp, identity: id})

	if sess, ok := ar.GetSession().(*openid.DefaultSession); ok && sess.Claims != nil {
		if _, granted := sess.Claims.Extra["groups"]; granted {
			groups := slices.Clone(id.groups)
			if groups == nil {
				groups = []string{}
			}
			sess.Claims.Extra["groups"] = groups
		}
	}
	return nil
}
