// Package whoami implements `pinniped whoami`: how the cluster sees you.
package whoami

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	identityv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/identity/v1alpha1"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/kubeflags"
	"github.com/pinniped-kit/pinniped/cli/ui/termsafe"
)

var selfSubjectReviewGVR = schema.GroupVersionResource{Group: "authentication.k8s.io", Version: "v1", Resource: "selfsubjectreviews"}

// Result is what whoami learned: the WhoAmIRequest as the agent answered it
// (or as made from Kubernetes' SelfSubjectReview, on a cluster without the
// agent), and where.
type Result struct {
	Cluster, Server string
	Request         identityv1alpha1.WhoAmIRequest
	Source          string
}

// Options are the inputs of `pinniped whoami`.
type Options struct {
	Kube    *kubeflags.Flags
	Output  string
	Timeout time.Duration
	// APIGroupSuffix is the agent's API group suffix (upstream's flag).
	APIGroupSuffix string

	f *cmdutil.Factory
}

// NewCmdWhoami returns `pinniped whoami`; runF (nil: Options.Run) does the work.
func NewCmdWhoami(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Kube: f.KubeFlags(), f: f}
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Show the username and groups the cluster sees for your current kubeconfig",
		Long: `whoami asks the cluster who you are: the pinniped agent's WhoAmIRequest API
when the agent is installed, else Kubernetes' own SelfSubjectReview. It logs
you in first if your kubeconfig needs it.`,
		Example: `  pinniped whoami
  pinniped whoami --context=prod -o json`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(o, o.Validate, runF, o.Run),
	}
	o.Kube.AddTo(cmd.Flags())
	o.Kube.AddContextAlias(cmd.Flags(), "kubeconfig-context")
	cmd.Flags().StringVarP(&o.Output, "output", "o", "text", "text, or json or yaml: the WhoAmIRequest, as upstream Pinniped prints it")
	cmd.Flags().StringVar(&o.APIGroupSuffix, "api-group-suffix", groupsuffix.Default, "API group suffix of the agent's APIs")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 0, "give up after this long (0: no limit)")
	return cmd
}

// Validate checks the flags.
func (o *Options) Validate() error {
	switch o.Output {
	case "text", "json", "yaml":
	default:
		return fmt.Errorf("-o %q: use text, json or yaml", o.Output)
	}
	if o.Timeout < 0 {
		return errors.New("--timeout must not be negative")
	}
	if err := groupsuffix.Validate(o.APIGroupSuffix); err != nil {
		return fmt.Errorf("--api-group-suffix: %w", err)
	}
	return nil
}

// Run asks the cluster and prints the answer.
func (o *Options) Run(ctx context.Context) error {
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	dyn, cfg, err := o.f.Dynamic(o.Kube.ClientConfig())
	if err != nil {
		return err
	}
	res, err := ask(ctx, dynamicCreator{dyn: dyn}, o.APIGroupSuffix)
	if err != nil {
		return err
	}
	res.Server, res.Cluster = cfg.Host, o.Kube.Cluster()
	return render(o.f.IO.Out, o.Output, res)
}

// creator creates one object and returns the server's answer.
type creator interface {
	create(ctx context.Context, gvr schema.GroupVersionResource, obj map[string]any) (map[string]any, error)
}

// Ask asks the cluster who the client's user is, as whoami does: the
// agent's WhoAmIRequest under suffix, else Kubernetes' SelfSubjectReview.
// Cluster and Server of the result are left for the caller.
func Ask(ctx context.Context, dyn dynamic.Interface, suffix string) (*Result, error) {
	return ask(ctx, dynamicCreator{dyn: dyn}, suffix)
}

func ask(ctx context.Context, c creator, suffix string) (*Result, error) {
	gv := schema.GroupVersion{Group: groupsuffix.Group(groupsuffix.Identity, suffix), Version: groupsuffix.Version}
	obj, err := c.create(ctx, gv.WithResource("whoamirequests"), map[string]any{
		"apiVersion": gv.String(), "kind": "WhoAmIRequest", "spec": map[string]any{}})
	if err == nil {
		r := &Result{Source: "WhoAmIRequest (pinniped agent)"}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &r.Request); err != nil {
			return nil, fmt.Errorf("the agent's WhoAmIRequest answer is unreadable: %w", err)
		}
		r.Request.APIVersion, r.Request.Kind = gv.String(), "WhoAmIRequest"
		return r, nil
	}
	if !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) && !isNoMatch(err) {
		return nil, fmt.Errorf("ask the cluster who you are: %w", err)
	}
	obj, err2 := c.create(ctx, selfSubjectReviewGVR, map[string]any{
		"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
	if err2 != nil {
		return nil, fmt.Errorf("ask the cluster who you are (is the pinniped agent installed and ready, with API group suffix %s?): %w", suffix, errors.Join(err, err2))
	}
	var review authenticationv1.SelfSubjectReview
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &review); err != nil {
		return nil, fmt.Errorf("the SelfSubjectReview answer is unreadable: %w", err)
	}
	u := review.Status.UserInfo
	r := &Result{Source: "SelfSubjectReview (Kubernetes)"}
	r.Request.APIVersion, r.Request.Kind = gv.String(), "WhoAmIRequest"
	r.Request.Status.KubernetesUserInfo.User = identityv1alpha1.UserInfo{Username: u.Username, UID: u.UID, Groups: u.Groups}
	for k, v := range u.Extra {
		if r.Request.Status.KubernetesUserInfo.User.Extra == nil {
			r.Request.Status.KubernetesUserInfo.User.Extra = map[string]identityv1alpha1.ExtraValue{}
		}
		r.Request.Status.KubernetesUserInfo.User.Extra[k] = identityv1alpha1.ExtraValue(v)
	}
	return r, nil
}

func isNoMatch(err error) bool {
	return strings.Contains(err.Error(), "could not find the requested resource")
}

func render(w io.Writer, format string, r *Result) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(&r.Request)
	case "yaml":
		b, err := yaml.Marshal(&r.Request)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	// The identity is the cluster's answer (from the IdP's claims): text
	// from elsewhere, escaped for the terminal. JSON and YAML above stay
	// exact; their encoders escape control characters themselves.
	u := r.Request.Status.KubernetesUserInfo.User
	fmt.Fprintf(w, "Current cluster info:\n\nName: %s\nURL: %s\n\nCurrent user info:\n\nUsername: %s\nGroups: %s\n",
		termsafe.Visible(r.Cluster), termsafe.Visible(r.Server), termsafe.Visible(u.Username), visibleList(u.Groups))
	keys := make([]string, 0, len(u.Extra))
	for k := range u.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "Extra %s: %s\n", termsafe.Visible(k), visibleList(u.Extra[k]))
	}
	fmt.Fprintf(w, "(answered by %s)\n", r.Source)
	return nil
}

// visibleList joins values from elsewhere, each escaped.
func visibleList(values []string) string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = termsafe.Visible(v)
	}
	return strings.Join(out, ", ")
}
