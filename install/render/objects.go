package render

import (
	"fmt"
	"io/fs"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	authv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/authentication/v1alpha1"
	configv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/config/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/apis/credentialttl"
	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/agent/apis/objectnames"
	"github.com/pinniped-kit/pinniped/install/crds"
)

// Object is one rendered object, with the reasons for its RBAC rules (if any).
type Object struct {
	*unstructured.Unstructured
	RuleReasons []string
}

// Render returns every object, in an order that applies cleanly (CRDs and
// namespaces before what lives in them).
func Render(c Config) ([]Object, error) {
	c.Defaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return build(&c)
}

// Template is Render without defaults or validation, for writing templates
// (package chartgen): its settings are placeholders that no check passes.
// Every field that Defaults fills must be set.
func Template(c Config) ([]Object, error) { return build(&c) }

func build(c *Config) ([]Object, error) {
	out, err := loadCRDs(c)
	if err != nil {
		return nil, err
	}
	b := builder{c: c}
	for _, group := range [][]part{b.accounts(), b.rbac(), b.api(), b.workload(), b.config()} {
		for _, p := range group {
			if p.obj == nil {
				continue
			}
			o, err := p.object()
			if err != nil {
				return nil, err
			}
			out = append(out, o)
		}
	}
	return out, nil
}

// part is one object to render, with the RBAC rules it grants (if any).
type part struct {
	obj   runtime.Object
	rules []rule
}

// object is p as an Object: unstructured, with the reasons of its rules.
func (p part) object() (Object, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p.obj)
	if err != nil {
		return Object{}, err
	}
	u := &unstructured.Unstructured{Object: m}
	// Zero timestamps and empty statuses are noise in manifests.
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	reasons := make([]string, len(p.rules))
	for i, r := range p.rules {
		reasons[i] = r.why
	}
	return Object{Unstructured: u, RuleReasons: reasons}, nil
}

// builder makes the objects of one configuration.
type builder struct{ c *Config }

func (b builder) meta(name, namespace, component string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels(b.c, component)}
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

// shared names objects another install would otherwise share.
func (b builder) shared(base string) string { return Name(b.c.GroupSuffix, base) }

// accounts: the namespace and the agent's and the proxy's ServiceAccounts.
func (b builder) accounts() []part {
	ns := b.c.Namespace
	return []part{
		{obj: &corev1.Namespace{TypeMeta: typeMeta("v1", "Namespace"), ObjectMeta: b.meta(ns, "", "")}},
		{obj: &corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: b.meta(AppName, ns, "agent")}},
		// The impersonation proxy forwards with this account's short-lived
		// tokens (TokenRequest); no pod runs as it.
		{obj: &corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: b.meta(ProxyServiceAccountName, ns, "impersonation-proxy"),
			AutomountServiceAccountToken: ptrFalse()}},
	}
}

// rbac: what the agent, the proxy's account and every caller of the
// pre-authentication APIs may do (see rbac.go for each rule's reason).
func (b builder) rbac() []part {
	c, ns, meta, shared := b.c, b.c.Namespace, b.meta, b.shared
	return []part{
		{obj: &rbacv1.ClusterRole{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"),
			ObjectMeta: meta(shared(ProxyServiceAccountName), "", "impersonation-proxy"), Rules: policyRules(proxyRules())}, rules: proxyRules()},
		{obj: clusterRoleBinding(c, shared(ProxyServiceAccountName), shared(ProxyServiceAccountName), rbacv1.Subject{Kind: "ServiceAccount", Name: ProxyServiceAccountName, Namespace: ns})},
		// The built-in role for servers that delegate authentication and
		// authorization: the proxy asks TokenReview about bearer tokens and
		// SubjectAccessReview about nested impersonation.
		{obj: clusterRoleBinding(c, shared(AppName+"-auth-delegator"), "system:auth-delegator", rbacv1.Subject{Kind: "ServiceAccount", Name: AppName, Namespace: ns})},
		{obj: &rbacv1.ClusterRole{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"),
			ObjectMeta: meta(shared(AppName), "", "agent"), Rules: policyRules(clusterRules(c))}, rules: clusterRules(c)},
		{obj: clusterRoleBinding(c, shared(AppName), shared(AppName), rbacv1.Subject{Kind: "ServiceAccount", Name: AppName, Namespace: ns})},
		{obj: &rbacv1.Role{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "Role"),
			ObjectMeta: meta(AppName, ns, "agent"), Rules: policyRules(namespaceRules(c))}, rules: namespaceRules(c)},
		{obj: roleBinding(c, AppName, ns, AppName)},
		{obj: &rbacv1.Role{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "Role"),
			ObjectMeta: meta(shared(AppName+"-cluster-info"), "kube-public", "agent"), Rules: policyRules(clusterInfoRules())}, rules: clusterInfoRules()},
		{obj: roleBinding(c, shared(AppName+"-cluster-info"), "kube-public", shared(AppName+"-cluster-info"))},
		{obj: unless(c.NoKubeCertAgent, &rbacv1.Role{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "Role"),
			ObjectMeta: meta(shared(FindControllerManagerName), "kube-system", "agent"), Rules: policyRules(kubeSystemRules())}), rules: kubeSystemRules()},
		{obj: unless(c.NoKubeCertAgent, roleBinding(c, shared(FindControllerManagerName), "kube-system", shared(FindControllerManagerName)))},
		// The built-in Role every extension API server needs: it reads the
		// front-proxy CA and header names from kube-system.
		{obj: roleBinding(c, shared(AppName+"-extension-apiserver-authentication-reader"), "kube-system", "extension-apiserver-authentication-reader")},
		{obj: &rbacv1.ClusterRole{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"),
			ObjectMeta: meta(shared("pinniped-pre-authn-apis"), "", "api"), Rules: policyRules(preAuthnRules(c))}, rules: preAuthnRules(c)},
		{obj: clusterRoleBinding(c, shared("pinniped-pre-authn-apis"), shared("pinniped-pre-authn-apis"),
			rbacv1.Subject{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "system:unauthenticated"},
			rbacv1.Subject{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "system:authenticated"})},
	}
}

// api: the aggregated API's Service and APIServices. They come before the
// Deployment: a replica publishes its CA in the APIServices as it starts.
func (b builder) api() []part {
	c, ns := b.c, b.c.Namespace
	return []part{
		{obj: &corev1.Service{TypeMeta: typeMeta("v1", "Service"), ObjectMeta: b.meta(ServiceName, ns, "api"),
			Spec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeClusterIP,
				Selector: map[string]string{"app.kubernetes.io/name": AppName},
				Ports:    []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromString("api"), Protocol: corev1.ProtocolTCP}},
			}}},
		{obj: apiService(c, groupsuffix.Group(groupsuffix.Login, c.GroupSuffix))},
		{obj: apiService(c, groupsuffix.Group(groupsuffix.Identity, c.GroupSuffix))},
	}
}

// workload: the agent's Deployment and its disruption budget.
func (b builder) workload() []part {
	return []part{
		{obj: deployment(b.c)},
		// Node drains evict one replica at a time, so with two or more
		// one always serves; a single replica may still be evicted (a
		// budget that forbade it would block every drain), and so may a
		// replica that is not ready anyway.
		{obj: &policyv1.PodDisruptionBudget{TypeMeta: typeMeta("policy/v1", "PodDisruptionBudget"),
			ObjectMeta: b.meta(AppName, b.c.Namespace, "agent"),
			Spec: policyv1.PodDisruptionBudgetSpec{
				MaxUnavailable:             ptrTo(intstr.FromInt32(1)),
				UnhealthyPodEvictionPolicy: ptrTo(policyv1.AlwaysAllow),
				Selector:                   &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": AppName, "app.kubernetes.io/component": "agent"}},
			}}},
	}
}

// config: the CredentialIssuer, and the authenticator the flags ask for.
func (b builder) config() []part {
	c := b.c
	parts := []part{
		// Named as always under any suffix: it lives in the suffix's own
		// group, so it cannot meet another install's.
		{obj: &configv1alpha1.CredentialIssuer{TypeMeta: typeMeta(groupsuffix.GroupVersion(groupsuffix.Config, c.GroupSuffix), "CredentialIssuer"),
			ObjectMeta: b.meta(CredentialIssuerName, "", "config"),
			Spec: configv1alpha1.CredentialIssuerSpec{ImpersonationProxy: &configv1alpha1.ImpersonationProxySpec{
				Mode: configv1alpha1.ImpersonationProxyModeAuto,
				Service: configv1alpha1.ImpersonationProxyServiceSpec{
					Type: configv1alpha1.ImpersonationProxyServiceTypeLoadBalancer,
					// AWS's classic load balancers cut connections idle for
					// 60 s by default, which ends quiet `kubectl logs -f` and
					// exec sessions; the proxy also sends keepalives.
					Annotations: map[string]string{"service.beta.kubernetes.io/aws-load-balancer-connection-idle-timeout": "4000"},
				},
			}}}},
	}
	if c.OIDCIssuer != "" {
		parts = append(parts, part{obj: &authv1alpha1.JWTAuthenticator{
			TypeMeta:   typeMeta(groupsuffix.GroupVersion(groupsuffix.Authentication, c.GroupSuffix), "JWTAuthenticator"),
			ObjectMeta: b.meta(c.AuthenticatorName, "", "authenticator"),
			Spec: authv1alpha1.JWTAuthenticatorSpec{
				Issuer: c.OIDCIssuer, Audience: c.OIDCAudience,
				Claims: authv1alpha1.JWTTokenClaims{Username: c.UsernameClaim, Groups: c.GroupsClaim},
				TLS:    tlsSpec(c.OIDCCABundle),
			},
		}})
	}
	if c.WebhookEndpoint != "" {
		parts = append(parts, part{obj: &authv1alpha1.WebhookAuthenticator{
			TypeMeta:   typeMeta(groupsuffix.GroupVersion(groupsuffix.Authentication, c.GroupSuffix), "WebhookAuthenticator"),
			ObjectMeta: b.meta(c.AuthenticatorName, "", "authenticator"),
			Spec:       authv1alpha1.WebhookAuthenticatorSpec{Endpoint: c.WebhookEndpoint, TLS: tlsSpec(c.WebhookCABundle)},
		}})
	}
	return parts
}

// unless is obj, or no object when skip is set.
func unless(skip bool, obj runtime.Object) runtime.Object {
	if skip {
		return nil
	}
	return obj
}

func agentArgs(c *Config) []string {
	helperImage := c.Image
	if c.NoKubeCertAgent {
		helperImage = "" // the agent's way of saying: never read the key
	}
	args := []string{"serve", "--namespace=" + c.Namespace, "--kube-cert-agent-image=" + helperImage}
	if !c.NoKubeCertAgent {
		args = append(args, c.KubeCertAgentPod.Args()...)
	}
	if c.CredentialTTL != 0 {
		args = append(args, "--credential-ttl="+credentialttl.Format(c.CredentialTTL))
	}
	if c.ProxyCredential != "" {
		args = append(args, "--proxy-credential="+c.ProxyCredential)
	}
	if c.ProxyAudit != "" {
		args = append(args, "--proxy-audit="+c.ProxyAudit)
	}
	if !groupsuffix.IsDefault(c.GroupSuffix) {
		args = append(args, "--api-group-suffix="+c.GroupSuffix)
	}
	return args
}

func ptrFalse() *bool {
	f := false
	return &f
}

func tlsSpec(pem []byte) *authv1alpha1.TLSSpec {
	if len(pem) == 0 {
		return nil
	}
	return &authv1alpha1.TLSSpec{CertificateAuthorityData: b64(pem)}
}

func loadCRDs(c *Config) ([]Object, error) {
	files, err := fs.Glob(crds.FS, "*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []Object
	for _, f := range files {
		raw, err := fs.ReadFile(crds.FS, f)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &u.Object); err != nil {
			return nil, fmt.Errorf("embedded CRD %s: %w", f, err)
		}
		if err := renameGroup(u, c.GroupSuffix); err != nil {
			return nil, fmt.Errorf("embedded CRD %s: %w", f, err)
		}
		l := u.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		for k, v := range labels(c, "") {
			l[k] = v
		}
		u.SetLabels(l)
		out = append(out, Object{Unstructured: u})
	}
	return out, nil
}

// renameGroup moves a generated CRD (always of the default groups) under
// suffix: its spec.group and, as Kubernetes requires, its name
// <plural>.<group>. Nothing else in the generated YAML names a group.
func renameGroup(crd *unstructured.Unstructured, suffix string) error {
	if groupsuffix.IsDefault(suffix) {
		return nil
	}
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	prefix, ok := strings.CutSuffix(group, ".concierge."+groupsuffix.Default)
	if !ok {
		return fmt.Errorf("spec.group %q is not a group of the default suffix", group)
	}
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	if plural == "" || crd.GetName() != plural+"."+group {
		return fmt.Errorf("name %q is not <spec.names.plural>.<spec.group>", crd.GetName())
	}
	renamed := groupsuffix.Group(prefix, suffix)
	crd.SetName(plural + "." + renamed)
	return unstructured.SetNestedField(crd.Object, renamed, "spec", "group")
}

func clusterRoleBinding(c *Config, name, role string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels(c, "agent")},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
		Subjects:   subjects,
	}
}

func roleBinding(c *Config, name, namespace, role string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels(c, "agent")},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: AppName, Namespace: c.Namespace}},
	}
}

func apiService(c *Config, group string) *unstructured.Unstructured {
	// Built unstructured: the kube-aggregator's Go types would pull a heavy
	// dependency into the CLI for one small object. caBundle is left to the
	// agent, which owns that field.
	port := int64(443)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata": map[string]any{
			"name":   "v1alpha1." + group,
			"labels": toAny(labels(c, "api")),
		},
		"spec": map[string]any{
			"group":                group,
			"version":              "v1alpha1",
			"groupPriorityMinimum": int64(9900),
			"versionPriority":      int64(15),
			"service":              map[string]any{"name": ServiceName, "namespace": c.Namespace, "port": port},
		},
	}}
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// deployment runs the agent: surge-only rollouts, spread over nodes where
// it can be, as a non-root user with the runtime's seccomp profile.
func deployment(c *Config) *appsv1.Deployment {
	selector := map[string]string{"app.kubernetes.io/name": AppName}
	podLabels := labels(c, "agent")
	yes := true
	uid := int64(65532)
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: AppName, Namespace: c.Namespace, Labels: labels(c, "agent")},
		Spec: appsv1.DeploymentSpec{
			Replicas: &c.Replicas,
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			// Surge only: a rollout (an upgrade, a rollback) starts a new
			// replica and waits for it to be ready (able to serve an
			// exchange) before it stops an old one.
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptrTo(intstr.FromInt32(0)), MaxSurge: ptrTo(intstr.FromInt32(1)),
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					ServiceAccountName: AppName,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   &yes,
						RunAsUser:      &uid,
						RunAsGroup:     &uid,
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						// Preferred, not required: a single-node cluster must still run both replicas.
						PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
							Weight: 100,
							PodAffinityTerm: corev1.PodAffinityTerm{
								LabelSelector: &metav1.LabelSelector{MatchLabels: selector},
								TopologyKey:   "kubernetes.io/hostname",
							},
						}},
					}},
					Containers: []corev1.Container{agentContainer(c)},
				},
			},
		},
	}
}

// agentContainer is the agent's one container: its arguments, ports,
// probes, resources and a read-only, unprivileged file system.
func agentContainer(c *Config) corev1.Container {
	yes, no := true, false
	return corev1.Container{
		Name:            "agent",
		Image:           c.Image,
		ImagePullPolicy: corev1.PullPolicy(c.ImagePullPolicy),
		Args:            agentArgs(c),
		Env: []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
			// The agent samples no allocations until --profiling-listen's
			// profiles are read (its main turns sampling off); this keeps
			// it off from the very start, before main runs. Sampling keeps a
			// profiling hash table of up to 1.4 MiB.
			{Name: "GODEBUG", Value: "memprofilerate=0"},
		},
		Ports: []corev1.ContainerPort{
			{Name: "api", ContainerPort: objectnames.APIPort, Protocol: corev1.ProtocolTCP},
			{Name: "proxy", ContainerPort: objectnames.ProxyPort, Protocol: corev1.ProtocolTCP},
			{Name: "health", ContainerPort: objectnames.HealthPort, Protocol: corev1.ProtocolTCP},
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("health")}},
			// Often: a restarted replica is kept out until its
			// authenticators are built, and back as soon as they are.
			PeriodSeconds: 2,
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("health")}},
			InitialDelaySeconds: 10, PeriodSeconds: 10, FailureThreshold: 3,
		},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(c.CPURequest),
				corev1.ResourceMemory: resource.MustParse(c.MemoryRequest),
			},
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(c.MemoryLimit)},
		},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: &no,
			ReadOnlyRootFilesystem:   &yes,
			RunAsNonRoot:             &yes,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
}

func ptrTo[T any](v T) *T { return &v }
