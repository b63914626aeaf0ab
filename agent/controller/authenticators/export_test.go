package authenticators

// The resources reconciled here under the default API group suffix, for
// the tests.
var (
	JWTAuthenticators     = Resource(kindJWT, "")
	WebhookAuthenticators = Resource(kindWebhook, "")
)
