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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	identityv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/identity/v1alpha1"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/kubeflags"
)

var (
	whoAmIGVR            = identityv1alpha1.SchemeGroupVersion.WithResource("whoamirequests")
	selfSubjectReviewGVR = schema.GroupVersionResource{Group: "authentication.k8s.io", Version: "v1", Resource: "selfsubjectreviews"}
)

// Result is what whoami prints.
type Result struct {
	Cluster  string              `json:"cluster"`
	Server   string              `json:"server"`
	Username string              `json:"username"`
	Groups   []string            `json:"groups,omitempty"`
	Extra    map[string][]string `json:"extra,omitempty"`
	Source   string              `json:"source"`
}

// Options are the inputs of `pinniped whoami`.
type Options struct {
	Kube    *kubeflags.Flags
	Output  string
	Timeout time.Duration

	f *cmdutil.Factory
}

// NewCmdWhoami returns `pinniped whoami`; runF (nil: Options.Run) does the work.
func NewCmdWhoami(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Kube: kubeflags.New(), f: f}
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
	cmd.Flags().StringVarP(&o.Output, "output", "o", "text", "text, json or yaml")
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
	res, err := ask(ctx, dynamicCreator{dyn: dyn})
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

func ask(ctx context.Context, c creator) (*Result, error) {
	obj, err := c.create(ctx, whoAmIGVR, map[string]any{
		"apiVersion": identityv1alpha1.SchemeGroupVersion.String(), "kind": "WhoAmIRequest", "spec": map[string]any{}})
	if err == nil {
		u, _, _ := unstructured.NestedMap(obj, "status", "kubernetesUserInfo", "user")
		return fromUser(u, "WhoAmIRequest (pinniped agent)"), nil
	}
	if !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) && !isNoMatch(err) {
		return nil, fmt.Errorf("ask the cluster who you are: %w", err)
	}
	obj, err2 := c.create(ctx, selfSubjectReviewGVR, map[string]any{
		"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
	if err2 != nil {
		return nil, fmt.Errorf("ask the cluster who you are: %w", errors.Join(err, err2))
	}
	u, _, _ := unstructured.NestedMap(obj, "status", "userInfo")
	return fromUser(u, "SelfSubjectReview (Kubernetes)"), nil
}

func isNoMatch(err error) bool {
	return strings.Contains(err.Error(), "could not find the requested resource")
}

func fromUser(u map[string]any, source string) *Result {
	r := &Result{Source: source}
	r.Username, _ = u["username"].(string)
	if g, ok := u["groups"].([]any); ok {
		for _, v := range g {
			if s, ok := v.(string); ok {
				r.Groups = append(r.Groups, s)
			}
		}
	}
	if e, ok := u["extra"].(map[string]any); ok {
		r.Extra = map[string][]string{}
		for k, v := range e {
			for _, x := range v.([]any) {
				if s, ok := x.(string); ok {
					r.Extra[k] = append(r.Extra[k], s)
				}
			}
		}
	}
	return r
}

func render(w io.Writer, format string, r *Result) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case "yaml":
		b, err := yaml.Marshal(r)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	fmt.Fprintf(w, "Current cluster info:\n\nName: %s\nURL: %s\n\nCurrent user info:\n\nUsername: %s\nGroups: %s\n",
		r.Cluster, r.Server, r.Username, strings.Join(r.Groups, ", "))
	keys := make([]string, 0, len(r.Extra))
	for k := range r.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "Extra %s: %s\n", k, strings.Join(r.Extra[k], ", "))
	}
	fmt.Fprintf(w, "(answered by %s)\n", r.Source)
	return nil
}
