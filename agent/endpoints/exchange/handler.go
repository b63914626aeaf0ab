// Package exchange serves the agent's aggregated API: discovery, the
// TokenCredentialRequest exchange and WhoAmIRequest. It is plain net/http;
// the caller (the kube-apiserver front proxy) is authenticated by middleware
// before requests reach it.
package exchange

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"

	identityv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/identity/v1alpha1"
	loginv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/login/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/authentication/identityrule"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth"
	"github.com/pinniped-kit/pinniped/agent/credentials/clustercred"
	"github.com/pinniped-kit/pinniped/agent/plumbing/observe"
)

const (
	// MaxBodyBytes bounds a request body; real requests are a few KiB.
	MaxBodyBytes = 1 << 20
	// MaxTokenBytes bounds a token. Larger ones are refused unverified, so
	// an attacker cannot make the agent parse megabytes of JSON.
	MaxTokenBytes = 64 << 10
	// FailedMessage is all a caller learns about a failed exchange.
	FailedMessage = "authentication failed"
	// exchangeTimeout bounds one exchange, including webhook calls.
	exchangeTimeout = 30 * time.Second
	// DefaultBodyTimeout bounds reading a request body. The exchange is
	// anonymous, so without it anyone could hold a connection and a
	// goroutine by sending a body one byte at a time.
	DefaultBodyTimeout = 5 * time.Second
	// DefaultMaxExchanges bounds the TokenCredentialRequests one Handler
	// works on at once. The exchange is anonymous (and public on the
	// impersonation proxy), and each one may hold a goroutine for up to
	// exchangeTimeout on a slow webhook or credential source and costs CPU in
	// signature checks and claim rules: without a bound anyone could
	// exhaust a replica. Legitimate exchanges take milliseconds, so 64 at
	// once is far above any real login burst.
	DefaultMaxExchanges = 64
	// DefaultSlotWait is how long an exchange waits for one of the others
	// to finish before it is answered 429, so a short burst is absorbed
	// and a flood is refused without queueing.
	DefaultSlotWait = time.Second
	// RetryAfterSeconds is the Retry-After of that 429.
	RetryAfterSeconds = 1
	// BusyMessage is the 429's message.
	BusyMessage = "the agent is busy with other token exchanges; try again in a moment"
)

// TokenAuthenticator validates a token with a named authenticator.
type TokenAuthenticator interface {
	AuthenticateToken(ctx context.Context, k tokenauth.Key, token string) (*authenticator.Response, error)
}

// Handler serves the aggregated API.
type Handler struct {
	Authenticators TokenAuthenticator
	Credentials    clustercred.Source
	// Log and Now, the logger and the clock, are required: set once where
	// it is built (the agent's server; a test's own).
	Log *slog.Logger
	Now func() time.Time
	// Observe, if set, is called after every exchange (metrics, audit).
	Observe func(observe.Exchange)
	// BodyTimeout bounds reading a request body (default DefaultBodyTimeout).
	BodyTimeout time.Duration
	// LogIdentities lets failure reasons name the username or group that
	// was refused. Off, they name only the rule (personal data stays out
	// of the log unless the admin opted in).
	LogIdentities bool
	// GroupSuffix is the API group suffix served (upstream's
	// api_group_suffix); empty means pinniped.dev. Only that spelling of
	// the groups exists: an agent under another suffix runs beside a
	// Concierge (or another agent) that owns the default groups.
	GroupSuffix string
	// MaxExchanges bounds the exchanges in progress at once (default
	// DefaultMaxExchanges); SlotWait is how long one beyond it waits for a
	// slot before it is answered 429 Too Many Requests with Retry-After
	// (default DefaultSlotWait).
	MaxExchanges int
	SlotWait     time.Duration

	apiOnce sync.Once
	apiDoc  *api

	slotsOnce sync.Once
	slots     chan struct{}
}

func (h *Handler) api() *api {
	h.apiOnce.Do(func() { h.apiDoc = newAPI(h.GroupSuffix) })
	return h.apiDoc
}

// ServeHTTP routes by path. Only the exact paths of our two group versions
// exist; everything else is a Kubernetes NotFound.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a := h.api()
	switch r.URL.Path {
	case "/apis":
		h.get(w, r, a.groupList)
	case a.loginGroupPath:
		h.get(w, r, a.loginGroup)
	case a.identityGroupPath:
		h.get(w, r, a.identityGroup)
	case a.loginPath:
		h.get(w, r, a.loginResources)
	case a.identityPath:
		h.get(w, r, a.identityResource)
	case a.tcrPath:
		h.collection(w, r, "TokenCredentialRequest", h.createTokenCredentialRequest, a.tcrList)
	case a.whoAmIPath:
		h.collection(w, r, "WhoAmIRequest", h.createWhoAmIRequest, a.whoAmIList)
	default:
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("the server could not find the requested resource (%s %s)", r.Method, r.URL.Path))
	}
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request, doc any) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, r)
		return
	}
	writeJSON(w, http.StatusOK, doc)
}

func (h *Handler) collection(w http.ResponseWriter, r *http.Request, kind string, create http.HandlerFunc, emptyList any) {
	switch r.Method {
	case http.MethodPost:
		if r.URL.Query().Has("dryRun") {
			writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, kind+" does not support dryRun")
			return
		}
		create(w, r)
	case http.MethodGet:
		// Nothing is stored, so a list is always empty; it exists so that
		// `kubectl get` and discovery-driven tools do not error.
		writeJSON(w, http.StatusOK, emptyList)
	default:
		methodNotAllowed(w, r)
	}
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, fmt.Sprintf("%s is not supported here", r.Method))
}

// decode reads a JSON body into obj, answering the error itself when it fails.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, kind, apiVersion string, obj any) bool {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			writeStatus(w, http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
				fmt.Sprintf("content type %q is not supported; send application/json", ct))
			return false
		}
	}
	body, err := h.readBody(w, r)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeStatus(w, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge, "request body is too large")
			return false
		}
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "could not read the request body")
		return false
	}
	if err := json.Unmarshal(body, obj); err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "request body is not a valid "+kind+" in JSON")
		return false
	}
	var tm metav1.TypeMeta
	_ = json.Unmarshal(body, &tm)
	if (tm.Kind != "" && tm.Kind != kind) || (tm.APIVersion != "" && tm.APIVersion != apiVersion) {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest,
			fmt.Sprintf("expected %s %s, got %s %s", apiVersion, kind, tm.APIVersion, tm.Kind))
		return false
	}
	return true
}

func (h *Handler) createTokenCredentialRequest(w http.ResponseWriter, r *http.Request) {
	start := h.Now()
	var req loginv1alpha1.TokenCredentialRequest
	if !h.decode(w, r, "TokenCredentialRequest", h.api().loginVersion, &req) {
		return
	}
	if req.Namespace != "" {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "TokenCredentialRequest is cluster-scoped; remove metadata.namespace")
		return
	}
	if req.Spec.Token == "" {
		writeInvalid(w, "TokenCredentialRequest", "spec.token", "a token is required")
		return
	}

	if !h.takeSlot(r.Context()) {
		if h.Observe != nil {
			h.Observe(observe.Exchange{Authenticator: tokenauth.Key{Kind: req.Spec.Authenticator.Kind, Name: req.Spec.Authenticator.Name}.String(),
				TokenHash: hashToken(req.Spec.Token), Reason: "too many exchanges in progress", Duration: h.Now().Sub(start)})
		}
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
		st := apierrors.NewTooManyRequests(BusyMessage, RetryAfterSeconds).Status()
		st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
		writeJSON(w, http.StatusTooManyRequests, &st)
		return
	}
	defer h.releaseSlot()

	ctx, cancel := context.WithTimeout(r.Context(), exchangeTimeout)
	defer cancel()
	res := h.exchange(ctx, &req.Spec)
	res.Duration = h.Now().Sub(start)
	if h.Observe != nil {
		h.Observe(res.Exchange)
	}

	// The response never echoes the token back.
	out := &loginv1alpha1.TokenCredentialRequest{
		TypeMeta:   metav1.TypeMeta{Kind: "TokenCredentialRequest", APIVersion: h.api().loginVersion},
		ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(start.UTC())},
	}
	if res.credential != nil {
		out.Status.Credential = res.credential
	} else {
		msg := FailedMessage
		out.Status.Message = &msg
	}
	// 201 even on failure, as upstream: clients read status.message.
	writeJSON(w, http.StatusCreated, out)
}

// takeSlot reserves one of MaxExchanges slots, waiting at most SlotWait
// (or until ctx ends) for one to free up.
func (h *Handler) takeSlot(ctx context.Context) bool {
	h.slotsOnce.Do(func() {
		n := h.MaxExchanges
		if n <= 0 {
			n = DefaultMaxExchanges
		}
		h.slots = make(chan struct{}, n)
	})
	select {
	case h.slots <- struct{}{}:
		return true
	default:
	}
	wait := h.SlotWait
	if wait <= 0 {
		wait = DefaultSlotWait
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case h.slots <- struct{}{}:
		return true
	case <-timer.C:
	case <-ctx.Done():
	}
	return false
}

func (h *Handler) releaseSlot() { <-h.slots }

type exchangeResult struct {
	observe.Exchange
	credential *loginv1alpha1.ClusterCredential
}

func (h *Handler) exchange(ctx context.Context, spec *loginv1alpha1.TokenCredentialRequestSpec) exchangeResult {
	ref := spec.Authenticator
	key := tokenauth.Key{Kind: ref.Kind, Name: ref.Name}
	res := exchangeResult{Exchange: observe.Exchange{Authenticator: key.String(), TokenHash: hashToken(spec.Token)}}
	fail := func(reason string) exchangeResult {
		res.Reason = reason
		h.Log.Info("token exchange failed", "authenticator", res.Authenticator, "tokenSHA256", res.TokenHash, "reason", reason)
		return res
	}

	switch {
	case len(spec.Token) > MaxTokenBytes:
		return fail(fmt.Sprintf("token of %d bytes exceeds the %d byte limit", len(spec.Token), MaxTokenBytes))
	case ref.APIGroup == nil || *ref.APIGroup != h.api().authGroup:
		return fail("spec.authenticator.apiGroup must be " + h.api().authGroup)
	case ref.Kind != "JWTAuthenticator" && ref.Kind != "WebhookAuthenticator":
		return fail("spec.authenticator.kind must be JWTAuthenticator or WebhookAuthenticator")
	}

	resp, err := h.Authenticators.AuthenticateToken(ctx, key, spec.Token)
	if err != nil {
		reason := err.Error()
		var refused *tokenauth.RefusedError
		if h.LogIdentities && errors.As(err, &refused) && refused.Detail != "" {
			reason += ": " + refused.Detail
		}
		return fail(reason)
	}
	u := resp.User
	if reason := checkUser(u, h.LogIdentities); reason != "" {
		return fail(reason)
	}
	res.Username, res.Groups = u.GetName(), u.GetGroups()
	cred, err := h.Credentials.Issue(ctx, u)
	var extraErr *clustercred.ExtraError
	switch {
	case errors.As(err, &extraErr):
		// The user is refused, as for a reserved name: this is about what
		// the authenticator returned, not a failure of the credential source.
		return fail(extraErr.Error())
	case err != nil:
		return fail("issue credential: " + err.Error())
	}
	res.Success = true
	res.credential = cred.ClusterCredential
	res.CredentialID = cred.CredentialID
	return res
}

// checkUser refuses identities no credential may carry, whichever
// credential source issues it (identityrule.External); each source refuses
// what its own credentials cannot carry (clustercred.ExtraError). The
// reason names the refused value only when named is set.
func checkUser(u user.Info, named bool) string {
	err := identityrule.External(u)
	if err == nil {
		return ""
	}
	reason := "refused the authenticator's identity: its " + err.Error()
	var refused *identityrule.Error
	if named && errors.As(err, &refused) && refused.Value() != "" {
		reason += fmt.Sprintf(": %q", refused.Value())
	}
	return reason
}

func (h *Handler) createWhoAmIRequest(w http.ResponseWriter, r *http.Request) {
	var req identityv1alpha1.WhoAmIRequest
	if !h.decode(w, r, "WhoAmIRequest", h.api().identityVersion, &req) {
		return
	}
	u, ok := request.UserFrom(r.Context())
	if !ok {
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "no user identity on the request")
		return
	}
	info := identityv1alpha1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
	if extra := u.GetExtra(); len(extra) > 0 {
		info.Extra = make(map[string]identityv1alpha1.ExtraValue, len(extra))
		for k, v := range extra {
			info.Extra[k] = v
		}
	}
	out := &identityv1alpha1.WhoAmIRequest{
		TypeMeta:   metav1.TypeMeta{Kind: "WhoAmIRequest", APIVersion: h.api().identityVersion},
		ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(h.Now().UTC())},
		Status:     identityv1alpha1.WhoAmIRequestStatus{KubernetesUserInfo: identityv1alpha1.KubernetesUserInfo{User: info}},
	}
	writeJSON(w, http.StatusCreated, out)
}

func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:8])
}

// readBody reads the whole body within the body timeout and size limit.
// The deadline needs no clearing: once the body is in, the HTTP/1 server
// clears it for its own background read, and on HTTP/2 it covers only this
// stream's body.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	timeout := h.BodyTimeout
	if timeout <= 0 {
		timeout = DefaultBodyTimeout
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
	return io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
}
