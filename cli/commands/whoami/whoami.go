// Package whoami implements `pinniped whoami`: how the cluster sees you.
package whoami

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/kubeflags"
	"github.com/pinniped-kit/pinniped/cli/login/agentclient"
	"github.com/pinniped-kit/pinniped/cli/ui/termsafe"
)

// Options are the inputs of `pinniped whoami`.
type Options struct {
	cmdutil.NothingToComplete
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
		RunE: cmdutil.RunE(o, runF),
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
	res, err := agentclient.WhoAmI(ctx, dyn, o.APIGroupSuffix)
	if err != nil {
		return err
	}
	res.Server, res.Cluster = cfg.Host, o.Kube.Cluster()
	return render(o.f.IO.Out, o.Output, res)
}

func render(w io.Writer, format string, r *agentclient.WhoAmIResult) error {
	switch format {
	case "json":
		// encoding/json escapes C0 controls but leaves C1 controls and
		// bidi and zero-width characters raw; termsafe.JSON escapes those
		// too, and the JSON still decodes to the cluster's exact answer.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		if err := enc.Encode(&r.Request); err != nil {
			return err
		}
		_, err := w.Write(termsafe.JSON(buf.Bytes()))
		return err
	case "yaml":
		// The YAML library escapes C0 controls, but refuses C1 controls
		// (an error, nothing shown), folds U+0085 into a space and writes
		// bidi and zero-width characters and U+2028/9 raw, and has no
		// setting to escape them. So only for YAML those characters are
		// escaped in the strings before encoding: the YAML then reads
		// back as the escaped text (\u202e), not the exact answer, for
		// identities that hold them; JSON keeps it exact.
		v, err := beyondASCII(&r.Request)
		if err != nil {
			return err
		}
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	// The identity is the cluster's answer (from the IdP's claims): text
	// from elsewhere, escaped for the terminal.
	u := r.Request.Status.KubernetesUserInfo.User
	fmt.Fprintf(w, "Current cluster info:\n\nName: %s\nURL: %s\n\nCurrent user info:\n\nUsername: %s\nGroups: %s\n",
		termsafe.Visible(r.Cluster), termsafe.Visible(r.Server), termsafe.Visible(u.Username), strings.Join(termsafe.VisibleAll(u.Groups), ", "))
	keys := make([]string, 0, len(u.Extra))
	for k := range u.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "Extra %s: %s\n", termsafe.Visible(k), strings.Join(termsafe.VisibleAll(u.Extra[k]), ", "))
	}
	fmt.Fprintf(w, "(answered by %s)\n", r.Source)
	return nil
}

// beyondASCII is v as JSON values (what the YAML library encodes, with its
// keys sorted as it sorts them) with termsafe.BeyondASCII applied to every
// string and key.
func beyondASCII(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	var walk func(any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case string:
			return termsafe.BeyondASCII(v)
		case []any:
			for i := range v {
				v[i] = walk(v[i])
			}
		case map[string]any:
			m := make(map[string]any, len(v))
			for k, e := range v {
				m[termsafe.BeyondASCII(k)] = walk(e)
			}
			return m
		}
		return v
	}
	return walk(out), nil
}
