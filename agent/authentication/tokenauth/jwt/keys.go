package jwt

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// KeyRefetchInterval is how often, at most, an authenticator fetches its
// issuer's key set. go-oidc's RemoteKeySet fetches the keys again for every
// token that names a key id it does not hold, and the exchange is
// anonymous: without a bound, each forged token (any kid, a valid shape)
// would cost the issuer a request, and an attacker could get the agent
// throttled or blocked by its own identity provider. A token signed by a
// key the issuer has just rotated in is refused until the window passes
// (a login retried a few seconds later succeeds); issuers publish new keys
// before signing with them, so normally none is.
const KeyRefetchInterval = 10 * time.Second

// maxKeySetBytes bounds a key set read into memory; real ones are a few KiB.
const maxKeySetBytes = 1 << 20

// keyFetchThrottle is the RoundTripper of the client that only fetches the
// key set: a fetch within KeyRefetchInterval of the last one that went out
// is answered with that one's answer, from memory. go-oidc then finds the
// same keys as before (and refuses a token none of them verifies) without
// the issuer seeing a request. The fetch itself is made with the
// authenticator's client, redirects and all, so a redirect cannot take a
// fetch past the throttle.
type keyFetchThrottle struct {
	client *http.Client
	every  time.Duration
	now    func() time.Time

	// mu is held across a fetch, so that requests arriving meanwhile get
	// its answer rather than making their own.
	mu     sync.Mutex
	last   time.Time // when the last fetch went out; zero: never
	status int
	header http.Header
	body   []byte
	err    error
}

func (k *keyFetchThrottle) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if now := k.now(); k.last.IsZero() || now.Sub(k.last) >= k.every || now.Before(k.last) {
		k.last = now
		k.status, k.header, k.body, k.err = k.fetch(req)
		if k.err != nil && req.Context().Err() != nil {
			// The caller gave up; the issuer did not fail. The next
			// caller may fetch at once.
			k.last = time.Time{}
		}
	}
	if k.err != nil {
		return nil, k.err
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", k.status, http.StatusText(k.status)), StatusCode: k.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: k.header.Clone(), Body: io.NopCloser(bytes.NewReader(k.body)), ContentLength: int64(len(k.body)),
		Request: req,
	}, nil
}

func (k *keyFetchThrottle) fetch(req *http.Request) (int, http.Header, []byte, error) {
	out, err := http.NewRequestWithContext(req.Context(), http.MethodGet, req.URL.String(), nil) //nolint:gosec // G704: the jwks_uri of the issuer's discovery document, checked to be https
	if err != nil {
		return 0, nil, nil, err
	}
	out.Header = req.Header.Clone()
	resp, err := k.client.Do(out) //nolint:gosec // G704: as above
	if err != nil {
		return 0, nil, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKeySetBytes+1))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("read the key set: %w", err)
	}
	if len(body) > maxKeySetBytes {
		return 0, nil, nil, errors.New("the key set is larger than 1 MiB; the issuer's jwks_uri must serve a JSON Web Key Set")
	}
	return resp.StatusCode, resp.Header, body, nil
}

// throttledKeyClient is the client of the key set: client's, with fetches
// throttled to one per KeyRefetchInterval on now's clock.
func throttledKeyClient(client *http.Client, now func() time.Time) *http.Client {
	return &http.Client{
		Transport: &keyFetchThrottle{client: client, every: KeyRefetchInterval, now: now},
		// client followed (or refused) any redirect already.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
