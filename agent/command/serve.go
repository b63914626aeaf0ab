package command

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"

	"github.com/pinniped-kit/pinniped/agent/apis/credentialttl"
	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/agent/apis/helperpod"
	"github.com/pinniped-kit/pinniped/agent/apis/objectnames"
	"github.com/pinniped-kit/pinniped/agent/apis/proxycredential"
	"github.com/pinniped-kit/pinniped/agent/credentials/clustercred"
	"github.com/pinniped-kit/pinniped/agent/plumbing/logbuffer"
	"github.com/pinniped-kit/pinniped/agent/plumbing/metrics"
	"github.com/pinniped-kit/pinniped/agent/server"
)

func newServeCommand() *cobra.Command {
	o := &server.Options{}
	var logFormat, logLevel, proxyAudit string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the TokenCredentialRequest API and run the agent's controllers",
		Long: `serve runs the agent. Inside a cluster it uses its ServiceAccount; outside
(for development) pass --kubeconfig.

It serves login.concierge.pinniped.dev and identity.concierge.pinniped.dev as
an aggregated API behind kube-apiserver, reconciles JWTAuthenticator and
WebhookAuthenticator resources, and reports working credential strategies in
the CredentialIssuer's status. With --api-group-suffix=example.com every
group is <prefix>.concierge.example.com instead (upstream's api_group_suffix),
so it can run beside a Concierge that keeps the default groups.

Where the cluster's signing key is out of reach (managed clusters), it also
runs the impersonation proxy, as spec.impersonationProxy of the
CredentialIssuer says: a TLS endpoint where kubectl presents a certificate the
agent issued, forwarded to the API server with Impersonate-* headers.`,
		Example: `  # in a Deployment (what "pinniped install" renders)
  pinniped-agent serve --namespace=pinniped

  # from a workstation, against a test cluster
  pinniped-agent serve --kubeconfig=$HOME/.kube/config --namespace=pinniped`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, logs, err := setUpLogging(cmd.ErrOrStderr(), logFormat, logLevel)
			if err != nil {
				return err
			}
			// Closed before returning, so a fatal error is printed after
			// every line logged before it.
			defer func() { _ = logs.Close() }()
			level, err := metrics.ParseProxyAuditLevel(proxyAudit)
			if err != nil {
				return err
			}
			o.ProxyAudit = level
			if err := o.Validate(); err != nil {
				return err
			}
			return server.Run(cmd.Context(), o, log)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig to use instead of the in-cluster ServiceAccount")
	f.StringVar(&o.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace the agent runs in (default $POD_NAMESPACE)")
	f.StringVar(&o.PodName, "pod-name", os.Getenv("POD_NAME"), "identity for leader election (default $POD_NAME, else the hostname)")
	f.StringVar(&o.ListenAddress, "listen", fmt.Sprintf(":%d", objectnames.APIPort), "address of the aggregated API (TLS)")
	f.StringVar(&o.HealthListenAddress, "health-listen", fmt.Sprintf(":%d", objectnames.HealthPort), "address of /healthz, /readyz and /metrics (plain HTTP)")
	f.StringVar(&o.ProfilingListenAddress, "profiling-listen", "", "loopback address (e.g. 127.0.0.1:6060) where Go's pprof profiles are served, for kubectl port-forward; off when empty (the default)")
	f.StringVar(&o.ServiceName, "service-name", objectnames.APIService, "Service in front of the aggregated API; the serving certificate is for <name>.<namespace>.svc")
	f.StringVar(&o.ServingSecretName, "serving-secret", objectnames.ServingSecret, "Secret holding the aggregated API's CA and serving certificate")
	f.StringVar(&o.CredentialIssuerName, "credential-issuer", objectnames.CredentialIssuer, "CredentialIssuer whose status the agent maintains")
	f.StringVar(&o.GroupSuffix, "api-group-suffix", groupsuffix.Default, "suffix of every API group the agent serves and watches: <prefix>.concierge.<suffix> (a DNS subdomain with a dot; as upstream's api_group_suffix)")
	f.StringSliceVar(&o.APIServiceNames, "apiservices", nil, "APIServices whose caBundle the agent keeps current (default: v1alpha1.login.concierge.<suffix> and v1alpha1.identity.concierge.<suffix>)")
	f.StringVar(&o.LeaseName, "lease", objectnames.Lease, "Lease used to elect the replica that writes statuses")
	f.DurationVar(&o.CertTTL, "credential-ttl", clustercred.DefaultTTL, fmt.Sprintf("lifetime of issued client certificates, from %s to %s (the CSR strategy raises it to %s, the API's minimum); see docs/security.md before raising it",
		credentialttl.Format(credentialttl.Min), credentialttl.Format(credentialttl.Max), credentialttl.Format(credentialttl.MinCSR)))
	f.StringVar(&o.KubeCertAgentImage, "kube-cert-agent-image", "", "image of the helper pod that reads the cluster signing key (normally the agent's own image; empty disables that strategy)")
	f.Int64Var(&o.KubeCertAgentPod.RunAsUser, helperpod.FlagRunAsUser, 0, helperpod.UsageRunAsUser)
	f.Int64Var(&o.KubeCertAgentPod.RunAsGroup, helperpod.FlagRunAsGroup, 0, helperpod.UsageRunAsGroup)
	f.StringVar(&o.KubeCertAgentPod.Strategy, helperpod.FlagStrategy, "", helperpod.UsageStrategy)
	f.StringVar(&o.ProxyListenAddress, "proxy-listen", fmt.Sprintf(":%d", objectnames.ProxyPort), "address of the impersonation proxy (TLS), served when the CredentialIssuer enables it")
	f.StringVar(&o.ProxyServiceAccount, "proxy-service-account", objectnames.ProxyServiceAccount, "ServiceAccount, allowed only to impersonate, whose short-lived tokens the proxy forwards with")
	f.StringVar(&o.ProxyCredential, "proxy-credential", proxycredential.Default, "what the impersonation proxy's TokenCredentialRequest returns: token (a bearer token valid only at this proxy; a renewal does not cut a client's open watches, logs and exec sessions) or certificate (a client certificate, for clients that need one)")
	f.StringVar(&proxyAudit, "proxy-audit", string(metrics.ProxyAuditAll), "impersonation proxy requests that get an audit line: all, changes (all but successful reads) or none (metrics only)")
	f.BoolVar(&o.LogIdentities, "audit-log-identities", false, "include usernames and groups (personal data) in audit lines")
	f.StringVar(&logFormat, "log-format", "json", "log format: json or text")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	return cmd
}

// setUpLogging makes the agent's logger, writing batched (see package
// logbuffer) to w, and sends the k8s.io libraries' klog output to it so the
// agent writes one format. klog.Fatal and the libraries' panic handler
// flush the batch before the process ends, so their last words are not
// lost with it.
func setUpLogging(w io.Writer, format, level string) (*slog.Logger, *logbuffer.Writer, error) {
	logs := logbuffer.New(w, logbuffer.DefaultDelay)
	log, err := newLogger(logs, format, level)
	if err != nil {
		return nil, nil, err
	}
	klog.SetLoggerWithOptions(logr.FromSlogHandler(log.Handler()), klog.ContextualLogger(true),
		klog.FlushLogger(func() { _ = logs.Flush() }))
	utilruntime.PanicHandlers = append(utilruntime.PanicHandlers, func(context.Context, any) { _ = logs.Flush() })
	return log, logs, nil
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use json or text", format)
}
