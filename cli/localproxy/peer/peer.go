// Package peer is the local proxy's defence in depth behind its secret:
// on Linux it refuses a request whose connection another local user
// opened (localuser tells which), even one holding the secret (a file
// another user was given a copy of, a kubeconfig left readable).
package peer

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pinniped-kit/pinniped/cli/localproxy/server"
	"github.com/pinniped-kit/pinniped/cli/localuser"
)

// Check wraps next: a request on a connection of another local user, or
// of a user that could not be found, is answered 403 and goes no further.
// Where the system cannot tell (ErrUnsupported) the local secret is the
// only check, and Check lets the request through.
//
// Check scans the socket tables on a connection's first request it sees,
// so it belongs behind the local secret (server.AfterSecret): in front of
// it, any local process could make the proxy read /proc/net/tcp and tcp6,
// which grow with every socket on the machine, once per connection it
// opens, without knowing the secret.
func Check(next http.Handler) http.Handler {
	self := os.Getuid()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uid, err := localuser.Of(r)
		switch {
		case errors.Is(err, localuser.ErrNoConnContext):
			// Fail closed: a server without ConnContext is a wiring bug.
			server.WriteStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden,
				"the pinniped proxy could not tell which local user opened this connection (no peer check on this server): restart it")
			return
		case errors.Is(err, localuser.ErrUnsupported):
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
