package render

import (
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
)

// rule is a PolicyRule with the reason it is needed; the reason is printed as
// a comment above the rule in YAML output, so reviewers of GitOps manifests
// see why the agent asks for each permission.
type rule struct {
	rbacv1.PolicyRule
	why string
}

func r(why string, groups, resources, verbs []string, names ...string) rule {
	return rule{PolicyRule: rbacv1.PolicyRule{APIGroups: groups, Resources: resources, Verbs: verbs, ResourceNames: names}, why: why}
}

var core = []string{""}

// clusterRules are the agent's cluster-wide permissions: on its own API
// groups (under its suffix) only.
func clusterRules(c *Config) []rule {
	authnGrp := []string{groupsuffix.Group(groupsuffix.Authentication, c.GroupSuffix)}
	configGrp := []string{groupsuffix.Group(groupsuffix.Config, c.GroupSuffix)}
	return []rule{
		r("watch the authenticators the admin configures, to validate tokens with them",
			authnGrp, []string{"jwtauthenticators", "webhookauthenticators"}, []string{"get", "list", "watch"}),
		r("report in each authenticator's status what works and what to fix",
			authnGrp, []string{"jwtauthenticators/status", "webhookauthenticators/status"}, []string{"update"}),
		r("read the CredentialIssuer, and recreate it if deleted: clients find the agent through it",
			configGrp, []string{"credentialissuers"}, []string{"get", "list", "watch", "create"}),
		r("report which credential strategies work and which frontend clients should use",
			configGrp, []string{"credentialissuers/status"}, []string{"update"}),
		r("publish the serving CA in the agent's two APIServices, so kube-apiserver trusts the agent",
			[]string{"apiregistration.k8s.io"}, []string{"apiservices"}, []string{"get", "patch"},
			groupsuffix.APIServiceNames(c.GroupSuffix)...),
		r("issue short-lived client certificates through the CSR API when the signing key is out of reach; delete them after use",
			[]string{"certificates.k8s.io"}, []string{"certificatesigningrequests"}, []string{"create", "get", "list", "watch", "delete"}),
		r("approve the agent's own CSRs once it has authenticated the user's token",
			[]string{"certificates.k8s.io"}, []string{"certificatesigningrequests/approval"}, []string{"update"}),
		r("approve for the kube-apiserver client signer only, never for kubelet or custom signers",
			[]string{"certificates.k8s.io"}, []string{"signers"}, []string{"approve"}, "kubernetes.io/kube-apiserver-client"),
		r("impersonation proxy, auto mode: run only where no node has a control-plane role",
			core, []string{"nodes"}, []string{"list"}),
	}
}

// proxyRules are all the impersonation proxy's ServiceAccount may do.
// Impersonation fails open (a request without Impersonate-* headers runs as
// the caller), so this identity must be useless for anything else.
func proxyRules() []rule {
	return []rule{
		r("act as the authenticated user, with their groups: the impersonation proxy's only job",
			core, []string{"users", "groups", "serviceaccounts"}, []string{"impersonate"}),
		// Extras are checked as userextras/<key>, and keys contain slashes
		// (authentication.kubernetes.io/credential-id), which no RBAC
		// wildcard but "*" matches; the verb is still only impersonate.
		r("keep the user's UID and extra attributes (credential-id, the original user of a nested impersonation)",
			[]string{"authentication.k8s.io"}, []string{"*"}, []string{"impersonate"}),
	}
}

// namespaceRules are the agent's permissions in its own namespace.
func namespaceRules(c *Config) []rule {
	rules := []rule{
		r("keep the serving certificates and the proxy's signer CA in Secrets shared by all replicas, follow the admin's proxy certificate as it rotates, and delete generated ones no longer used",
			core, []string{"secrets"}, []string{"get", "list", "watch", "create", "update", "delete"}),
		r("run the impersonation proxy's Service (LoadBalancer or ClusterIP, as the CredentialIssuer says)",
			core, []string{"services"}, []string{"get", "list", "watch", "create", "update", "delete"}),
		r("get short-lived tokens for the impersonate-only ServiceAccount the proxy forwards with",
			core, []string{"serviceaccounts/token"}, []string{"create"}, ProxyServiceAccountName),
		r("read CA bundles that authenticators reference by ConfigMap",
			core, []string{"configmaps"}, []string{"get"}),
		r("see that every agent replica runs the same version before the impersonation proxy hands out its own tokens, which older replicas cannot read; find the kube-cert-agent helper pod",
			core, []string{"pods"}, []string{"get", "list"}),
		r("elect one replica to write statuses, so replicas do not fight",
			[]string{"coordination.k8s.io"}, []string{"leases"}, []string{"create"}),
		r("renew the election's Lease",
			[]string{"coordination.k8s.io"}, []string{"leases"}, []string{"get", "update"}, LeaseName),
	}
	if c.NoKubeCertAgent {
		return rules
	}
	return append(rules, kubeCertAgentRules()...)
}

// kubeCertAgentRules let the agent run the helper that reads the signing
// key (none of them with --kube-cert-agent=false).
func kubeCertAgentRules() []rule {
	return []rule{
		// RBAC cannot limit create by name; get and update are limited.
		r("run the kube-cert-agent helper pod beside kube-controller-manager",
			[]string{"apps"}, []string{"deployments"}, []string{"create"}),
		r("keep the kube-cert-agent helper's Deployment up to date",
			[]string{"apps"}, []string{"deployments"}, []string{"get", "update"}, KubeCertAgentName),
		r("read the cluster signing key through the helper pod, into memory only",
			core, []string{"pods/exec"}, []string{"create", "get"}),
	}
}

// kubeSystemRules let the agent find kube-controller-manager, to learn where
// the signing key is and which node holds it.
func kubeSystemRules() []rule {
	return []rule{
		r("find the kube-controller-manager pod: its node and flags say where the signing key is",
			core, []string{"pods"}, []string{"get", "list"}),
	}
}

// clusterInfoRules let the agent read the public cluster address (kubeadm's
// kube-public/cluster-info) to advertise to clients.
func clusterInfoRules() []rule {
	return []rule{
		r("read the cluster's public address and CA to advertise in the CredentialIssuer",
			core, []string{"configmaps"}, []string{"get"}, "cluster-info"),
	}
}

// preAuthnRules are granted to everyone, including unauthenticated users:
// trading a token for a credential is how one becomes authenticated.
func preAuthnRules(c *Config) []rule {
	return []rule{
		r("anyone may trade an external token for a credential (the token is the proof), or ask who they are",
			[]string{groupsuffix.Group(groupsuffix.Login, c.GroupSuffix), groupsuffix.Group(groupsuffix.Identity, c.GroupSuffix)},
			[]string{"tokencredentialrequests", "whoamirequests"}, []string{"create", "list"}),
	}
}

func policyRules(rules []rule) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, len(rules))
	for i, r := range rules {
		out[i] = r.PolicyRule
	}
	return out
}
