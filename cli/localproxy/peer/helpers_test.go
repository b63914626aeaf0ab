package peer

import (
	"context"
	"net/http"
)

func contextWith(r *http.Request, res result) context.Context {
	return context.WithValue(r.Context(), resultKey{}, res)
}
