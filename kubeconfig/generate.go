package kubeconfig

import (
	"encoding/base64"
	"fmt"
	"sort"
	"strconv"
	"strings"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// LoginParams are the `pinniped login` arguments a kubeconfig carries.
type LoginParams struct {
	PinnipedPath string
	InstallHint  string

	Frontend      Frontend
	APIGroupSuff  string
	Authenticator Authenticator

	// Static token login (webhook authenticators).
	StaticToken, StaticTokenEnv string

	// OIDC login.
	ClientID        string
	Scopes          []string
	ListenPort      int
	SkipBrowser     bool
	RequestAudience string
	OIDCCABundle    []byte
	Flow            string

	CredentialCache string
	SessionCache    string
	SkipListen      bool
	// Upstream identity provider at a Pinniped Supervisor.
	UpstreamName, UpstreamType, UpstreamFlow string
	// NoConcierge makes the ID token itself the credential.
	NoConcierge bool
}

// Args builds the exec plugin's arguments. No secret is ever put here: a
// static token appears only if the admin passed it literally with
// --static-token, and --static-token-env is preferred.
func (p *LoginParams) Args() []string {
	var args []string
	if p.StaticToken != "" || p.StaticTokenEnv != "" {
		args = append(args, "login", "static")
	} else {
		args = append(args, "login", "oidc")
	}
	if !p.NoConcierge {
		args = append(args,
			"--enable-concierge",
			"--concierge-api-group-suffix="+p.APIGroupSuff,
			"--concierge-authenticator-name="+p.Authenticator.Name,
			"--concierge-authenticator-type="+p.Authenticator.Type,
			"--concierge-endpoint="+p.Frontend.Endpoint,
			"--concierge-ca-bundle-data="+base64.StdEncoding.EncodeToString(p.Frontend.CABundle),
		)
	}
	if p.CredentialCache != "" {
		args = append(args, "--credential-cache="+p.CredentialCache)
	}
	switch {
	case p.StaticToken != "":
		return append(args, "--token="+p.StaticToken)
	case p.StaticTokenEnv != "":
		return append(args, "--token-env="+p.StaticTokenEnv)
	}
	args = append(args, "--issuer="+p.Authenticator.Issuer, "--client-id="+p.ClientID, "--scopes="+strings.Join(p.Scopes, ","))
	if len(p.OIDCCABundle) > 0 {
		args = append(args, "--ca-bundle-data="+base64.StdEncoding.EncodeToString(p.OIDCCABundle))
	}
	if p.RequestAudience != "" {
		args = append(args, "--request-audience="+p.RequestAudience)
	}
	if p.SkipBrowser {
		args = append(args, "--skip-browser")
	}
	if p.ListenPort != 0 {
		args = append(args, "--listen-port="+strconv.Itoa(p.ListenPort))
	}
	if p.Flow != "" {
		args = append(args, "--flow="+p.Flow)
	}
	if p.SkipListen {
		args = append(args, "--skip-listen")
	}
	if p.SessionCache != "" {
		args = append(args, "--session-cache="+p.SessionCache)
	}
	if p.UpstreamName != "" {
		args = append(args, "--upstream-identity-provider-name="+p.UpstreamName)
	}
	if p.UpstreamType != "" {
		args = append(args, "--upstream-identity-provider-type="+p.UpstreamType)
	}
	if p.UpstreamFlow != "" {
		args = append(args, "--upstream-identity-provider-flow="+p.UpstreamFlow)
	}
	return args
}

// Build returns a kubeconfig with one cluster, user and context named name.
func Build(name string, server string, caBundle []byte, p *LoginParams) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cluster := clientcmdapi.NewCluster()
	cluster.Server = server
	cluster.CertificateAuthorityData = caBundle
	cfg.Clusters[name] = cluster
	user := clientcmdapi.NewAuthInfo()
	user.Exec = &clientcmdapi.ExecConfig{
		APIVersion:         "client.authentication.k8s.io/v1",
		Command:            p.PinnipedPath,
		Args:               p.Args(),
		Env:                []clientcmdapi.ExecEnvVar{},
		InstallHint:        p.InstallHint,
		ProvideClusterInfo: true,
		InteractiveMode:    clientcmdapi.IfAvailableExecInteractiveMode,
	}
	cfg.AuthInfos[name] = user
	ctx := clientcmdapi.NewContext()
	ctx.Cluster, ctx.AuthInfo = name, name
	cfg.Contexts[name] = ctx
	cfg.CurrentContext = name
	return cfg
}

// Merge adds gen's entries to into, refusing to overwrite entries that
// exist with different content, so existing contexts are never touched.
func Merge(into, gen *clientcmdapi.Config) error {
	var clashes []string
	for k := range gen.Clusters {
		if _, ok := into.Clusters[k]; ok {
			clashes = append(clashes, "cluster "+k)
		}
	}
	for k := range gen.AuthInfos {
		if _, ok := into.AuthInfos[k]; ok {
			clashes = append(clashes, "user "+k)
		}
	}
	for k := range gen.Contexts {
		if _, ok := into.Contexts[k]; ok {
			clashes = append(clashes, "context "+k)
		}
	}
	if len(clashes) > 0 {
		sort.Strings(clashes)
		return fmt.Errorf("the kubeconfig already has %s; choose another --generated-name-suffix or remove them first", strings.Join(clashes, ", "))
	}
	for k, v := range gen.Clusters {
		into.Clusters[k] = v
	}
	for k, v := range gen.AuthInfos {
		into.AuthInfos[k] = v
	}
	for k, v := range gen.Contexts {
		into.Contexts[k] = v
	}
	return nil
}
