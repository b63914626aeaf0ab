// Package peer is the local proxy's defence in depth behind its secret: on
// Linux it finds which local user opened a loopback connection, and the
// proxy refuses any user but its own, even one holding the secret (a file
// another user was given a copy of, a kubeconfig left readable).
//
// The kernel's socket tables (/proc/net/tcp and tcp6) list every TCP socket
// of this network namespace with its owner's uid. The peer of a connection
// we accepted is the socket whose local address is our remote address and
// whose remote address is our local one.
package peer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pinniped-kit/pinniped/cli/localproxy/server"
)

// ErrUnsupported: this system has no socket table to ask (not Linux).
var ErrUnsupported = errors.New("finding a connection's local user is not supported on this system")

type resultKey struct{}

// result is a connection's peer, found once, on the connection's first
// request: in that request's goroutine, not in the server's accept loop,
// where a scan of the socket table would hold up every other connection.
type result struct {
	once          sync.Once
	local, remote net.Addr
	uid           int
	err           error
}

func (r *result) find() (int, error) {
	r.once.Do(func() { r.uid, r.err = UID(r.local, r.remote) })
	return r.uid, r.err
}

// ConnContext is an http.Server's ConnContext: it keeps the connection's
// addresses so that Check finds its peer uid once and judges every request
// by it. It never fails the connection itself: Check answers with a Status
// the client can show.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, resultKey{}, &result{local: c.LocalAddr(), remote: c.RemoteAddr()})
}

// Check wraps next: a request on a connection of another local user, or
// of a user that could not be found, is answered 403 and goes no further.
// Where the system cannot tell (ErrUnsupported) the local secret is the
// only check, and Check lets the request through.
func Check(next http.Handler) http.Handler {
	self := os.Getuid()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, ok := r.Context().Value(resultKey{}).(*result)
		var uid int
		var err error
		if ok {
			uid, err = res.find()
		}
		switch {
		case !ok:
			// Fail closed: a server without ConnContext is a wiring bug.
			server.WriteStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden,
				"the pinniped proxy could not tell which local user opened this connection (no peer check on this server): restart it")
			return
		case errors.Is(err, ErrUnsupported):
		case err != nil:
			server.WriteStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden,
				fmt.Sprintf("the pinniped proxy could not tell which local user opened this connection, so it refuses it: %v", err))
			return
		case uid != self:
			server.WriteStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden,
				"this pinniped proxy serves only the user who started it (uid "+strconv.Itoa(self)+"); start your own with `pinniped proxy`")
			return
		}
		next.ServeHTTP(w, r)
	})
}
