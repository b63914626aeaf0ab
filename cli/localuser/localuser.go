// Package localuser tells which local user opened a loopback connection,
// for servers that serve only their own user: pinniped proxy (behind its
// secret, as defence in depth: a secret file another user was given a copy
// of, a kubeconfig left readable) and logout's end-session page, whose URL
// every local user can read in /proc.
//
// The kernel's socket tables (/proc/net/tcp and tcp6) list every TCP socket
// of this network namespace with its owner's uid. The peer of a connection
// we accepted is the socket whose local address is our remote address and
// whose remote address is our local one. Other systems have no such table
// (ErrUnsupported).
package localuser

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
)

// ErrUnsupported: this system has no socket table to ask (not Linux).
var ErrUnsupported = errors.New("finding a connection's local user is not supported on this system")

// ErrNoConnContext: the request's server was not given ConnContext, so
// nothing tells its connection's peer. A wiring bug, which callers refuse.
var ErrNoConnContext = errors.New("the server keeps no peer for its connections (no ConnContext)")

type resultKey struct{}

// result is a connection's peer, found once, on the connection's first
// request that asks: in that request's goroutine, not in the server's
// accept loop, where a scan of the socket table would hold up every other
// connection.
type result struct {
	once          sync.Once
	lookup        func(local, remote net.Addr) (int, error)
	local, remote net.Addr
	uid           int
	err           error
}

func (r *result) find() (int, error) {
	r.once.Do(func() { r.uid, r.err = r.lookup(r.local, r.remote) })
	return r.uid, r.err
}

// ConnContext is an http.Server's ConnContext: it keeps the connection's
// addresses so that Of finds its peer once and answers every request on
// it. It never fails the connection itself: the caller refuses requests
// in its own words.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return ConnContextWith(UID)(ctx, c)
}

// ConnContextWith is ConnContext finding the peer with lookup instead of
// UID (tests count or fake the lookups).
func ConnContextWith(lookup func(local, remote net.Addr) (int, error)) func(context.Context, net.Conn) context.Context {
	return func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, resultKey{}, &result{lookup: lookup, local: c.LocalAddr(), remote: c.RemoteAddr()})
	}
}

// Of is the uid of the local user at the other end of r's connection. The
// socket tables are scanned once per connection, on the first call for it,
// and they grow with every socket on the machine: a caller should call Of
// only for a request that has passed its cheaper checks (a secret, a
// path). The error is ErrNoConnContext, ErrUnsupported, or why the user
// could not be found; callers fail closed on all but ErrUnsupported.
func Of(r *http.Request) (int, error) {
	res, ok := r.Context().Value(resultKey{}).(*result)
	if !ok {
		return 0, ErrNoConnContext
	}
	return res.find()
}
