package doctor

import (
	"context"
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/cli/login/agentclient"
)

func (s *agentFacts) youClient() (dynamic.Interface, string, bool) {
	dyn, why := s.kube()
	return dyn, why, dyn != nil
}

func checkIdentity(ctx context.Context, s *agentFacts) Result {
	dyn, why, can := s.youClient()
	if !can {
		return skip("%s", why)
	}
	suffix := groupsuffix.OrDefault(s.d.APIGroupSuffix)
	if s.conc != nil {
		suffix = s.conc.Suffix()
	}
	res, err := agentclient.WhoAmI(ctx, dyn, suffix)
	if err != nil {
		if res, done := s.refused(err, "who you are"); done {
			return res
		}
		return fail(err.Error(), fmt.Sprintf("the cluster did not say who you are (%v): try `pinniped whoami`, or ask your administrator", err))
	}
	u := res.Request.Status.KubernetesUserInfo.User
	groups := "no groups"
	if len(u.Groups) > 0 {
		groups = "groups " + strings.Join(u.Groups, ", ")
	}
	return ok("%s, %s (answered by %s)", u.Username, groups, res.Source)
}

var rulesReviewGVR = schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectrulesreviews"}

// probes are what the one-line summary says yes or no to: what people
// most often try first.
var probes = []struct{ verb, group, resource string }{
	{"list", "", "pods"}, {"create", "", "pods"}, {"list", "apps", "deployments"}, {"list", "", "secrets"}, {"list", "", "namespaces"},
}

func checkPermissions(ctx context.Context, s *agentFacts) Result {
	dyn, why, can := s.youClient()
	if !can {
		return skip("%s", why)
	}
	obj := map[string]any{"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": map[string]any{"namespace": s.namespace}}
	u, err := dyn.Resource(rulesReviewGVR).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil {
		if res, done := s.refused(err, "your own permissions (SelfSubjectRulesReview)"); done {
			return res
		}
		return fail(err.Error(), fmt.Sprintf("the cluster did not list your permissions (%v): try `kubectl auth can-i --list`", err))
	}
	var review authorizationv1.SelfSubjectRulesReview
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &review); err != nil {
		return fail(err.Error(), fmt.Sprintf("the SelfSubjectRulesReview answer is unreadable (%v): try `kubectl auth can-i --list`", err))
	}
	summary, useful := summarise(s.namespace, review.Status)
	if !useful && review.Status.Incomplete {
		// Webhook authorizers cannot list rules: an empty list then says
		// nothing about what they allow.
		return ok("%s; the cluster's authorizer cannot list rules, so what is listed is a lower bound (try `kubectl auth can-i VERB RESOURCE`)", summary)
	}
	if !useful {
		return warn(summary, fmt.Sprintf("you may not read anything in namespace %s (only review your own access): ask your administrator for a RoleBinding there", s.namespace))
	}
	return ok("%s", summary)
}

// summarise puts a rules review in one line, and says whether it grants
// anything beyond asking about oneself.
func summarise(namespace string, st authorizationv1.SubjectRulesReviewStatus) (string, bool) {
	var parts []string
	for _, p := range probes {
		what := p.resource
		if p.group != "" {
			what = p.group + "/" + p.resource
		}
		yes := "no"
		if allows(st.ResourceRules, p.verb, p.group, p.resource) {
			yes = "yes"
		}
		parts = append(parts, fmt.Sprintf("%s %s: %s", p.verb, what, yes))
	}
	admin := "no"
	if allows(st.ResourceRules, "*", "*", "*") {
		admin = "yes"
	}
	useful := false
	for _, rule := range st.ResourceRules {
		self := true
		for _, g := range rule.APIGroups {
			if g != "authorization.k8s.io" && g != "authentication.k8s.io" && !strings.HasPrefix(g, "identity.concierge.") {
				self = false
			}
		}
		if !self && (slices.Contains(rule.Verbs, "*") || slices.Contains(rule.Verbs, "get") || slices.Contains(rule.Verbs, "list")) {
			useful = true
		}
	}
	s := fmt.Sprintf("in namespace %s: %d resource rules; %s; cluster-admin-like (*): %s", namespace, len(st.ResourceRules), strings.Join(parts, ", "), admin)
	if st.Incomplete {
		s += " (the list may be incomplete"
		if st.EvaluationError != "" {
			s += ": " + st.EvaluationError
		}
		s += ")"
	}
	return s, useful
}

// allows: some rule without resource names grants verb on group/resource
// ("*" asks for a wildcard rule itself).
func allows(rules []authorizationv1.ResourceRule, verb, group, resource string) bool {
	match := func(list []string, v string) bool {
		return slices.Contains(list, "*") || (v != "*" && slices.Contains(list, v))
	}
	for _, r := range rules {
		if len(r.ResourceNames) == 0 && match(r.Verbs, verb) && match(r.APIGroups, group) && match(r.Resources, resource) {
			return true
		}
	}
	return false
}
