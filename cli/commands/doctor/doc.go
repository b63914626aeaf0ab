// Package doctor is `pinniped doctor`: it walks the chain a kubectl call
// goes through for one kubeconfig context (the exec entry, the credential
// cache, the clocks, the OIDC issuer, the agent, and what the cluster makes
// of the cached credential) and says, for each link, that it holds or what
// to do about it in one sentence.
//
// Why it is built the way it is:
//
//   - A person runs doctor because a login is failing, so doctor must
//     never start one: no browser, no prompt, no refresh (which rotates a
//     refresh token). It reads a cached cluster credential through the
//     same cache key a login would use (only reads: a corrupt entry is
//     reported, not deleted), and otherwise works anonymously; the checks
//     that need a login say so. It never sends a credential to a cluster
//     whose server it cannot verify (http, insecure-skip-tls-verify).
//   - Every check runs, whatever failed before it: the point is to see
//     the whole chain at once. A check that depends on an earlier one
//     reports SKIP and why.
//   - The checks run in stages, in the chain's order: context, exec,
//     cache, cluster, issuer, agent, you. A stage's checks (in its own
//     file) write its facts (contextFacts, execFacts, ...), which embed the
//     previous stage's and are handed to the next stage; the you checks
//     read the agent's. A check reads what earlier stages, and the earlier
//     checks of its own stage, learned; a fact it lacks is the skip's
//     reason.
//   - Each check has a stable name (below), so scripts and the end-to-end
//     tests can break a link and find the advice that names it; titles
//     and sentences may change, names may not.
//   - Nothing secret is printed: kubeconfigs carry static tokens and client
//     secrets in exec arguments and keys in user entries, and the cache
//     holds credentials. Doctor builds every sentence itself (the argument
//     parser's errors name flags, never values), and the report is
//     scrubbed of every secret it met (as written, %q-quoted and
//     JSON-escaped; every positional argument counts as one) before it is
//     printed, as a second line of defence. The text output shows control
//     characters escaped: servers' messages must not drive the terminal.
//   - The checks reach the world only through the Factory (clock,
//     environment, caches and their probe, HTTP and cluster clients) and
//     Doctor's own seams for binaries (LookPath, GOOS, ReadBuild, Self), so
//     the same code runs in the tests against httptest servers and
//     temporary files.
//
// The checks, in order:
//
//	kubeconfig.context      the kubeconfig loads; the context, its cluster and user exist
//	exec.front              the user's exec entry runs pinniped, and that binary is found
//	exec.policy             kubectl's kuberc (credentialPluginPolicy, credentialPluginAllowlist) lets it run
//	exec.engine             pinniped-engine sits beside it (where pinniped looks for it)
//	exec.versions           pinniped, pinniped-engine and this binary are the same build
//	exec.args               the login arguments parse and validate (login oidc|static)
//	cache.backend           the store a login with this --credential-cache uses; keyring or file fallback, and why
//	cache.credential        a valid cluster credential is cached for this context (read, never refreshed)
//	cluster.api             the API server answers GET /version over https checked with the kubeconfig's CA
//	clock.cluster           this machine's clock against the API server's (Date header)
//	clock.issuer            this machine's and the cluster's clock against the issuer's
//	issuer.tls              the issuer is https and its certificate is trusted with the login's CA bundle
//	issuer.discovery        the issuer's discovery document is valid and names the issuer exactly
//	issuer.jwks             the issuer publishes at least one signing key
//	issuer.client           the authorize endpoint accepts the client id and loopback redirect URI
//	issuer.upstream         a Pinniped Supervisor lists the configured identity provider
//	agent.api               the TokenCredentialRequest API answers at the concierge endpoint
//	agent.apiservice        the agent's APIServices are Available (needs a login)
//	agent.credentialissuer  the CredentialIssuer's strategies and frontends (needs a login)
//	agent.authenticator     the named authenticator exists, is Ready, and matches the login (needs a login)
//	agent.proxy             the impersonation proxy's endpoint and certificate, when there is one
//	you.identity            who the cluster says you are (needs a login)
//	you.permissions         a SelfSubjectRulesReview of the context's namespace, in one line (needs a login)
package doctor
