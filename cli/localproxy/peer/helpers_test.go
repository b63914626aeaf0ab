package peer

import (
	"context"
	"net/http"
)

func contextWith(r *http.Request, res *result) context.Context {
	return context.WithValue(r.Context(), resultKey{}, res)
}

// known is a result already found.
func known(uid int, err error) *result {
	r := &result{uid: uid, err: err}
	r.once.Do(func() {})
	return r
}
