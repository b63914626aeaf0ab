package tokenauth

import (
	"context"
	"testing"

	"k8s.io/apiserver/pkg/authentication/authenticator"
)

type closer struct{ closed int }

func (c *closer) AuthenticateToken(context.Context, string) (*authenticator.Response, bool, error) {
	return nil, false, nil
}
func (c *closer) CloseIdleConnections() { c.closed++ }

func TestReplacedAndRemovedAuthenticatorsAreReleased(t *testing.T) {
	r := NewRegistry()
	k := Key{Kind: "WebhookAuthenticator", Name: "hook"}
	first, second := &closer{}, &closer{}
	r.Set(k, first)
	r.Set(k, second)
	if first.closed != 1 || second.closed != 0 {
		t.Fatalf("after replacing: first closed %d times, second %d", first.closed, second.closed)
	}
	r.Delete(k)
	if second.closed != 1 {
		t.Fatalf("after deleting: closed %d times", second.closed)
	}
	r.Delete(k) // nothing there: no panic
}
