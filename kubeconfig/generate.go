package kubeconfig

import (
	"fmt"
	"sort"
	"strings"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ExecAPIVersion is the client.authentication.k8s.io version the exec
// entries ask for (see Build).
const ExecAPIVersion = "client.authentication.k8s.io/v1beta1"

// ContextEnv names, in the exec entry's environment, the kubeconfig
// context the entry was written for, so a login that needs a person and
// cannot ask one (an IDE's kubectl) names the command that logs in ahead
// for it: `pinniped login --context NAME`. Upstream's CLI ignores it.
const ContextEnv = "PINNIPED_CONTEXT"

// Exec is how kubectl runs pinniped.
type Exec struct {
	Path        string
	InstallHint string
}

// Login is a login a kubeconfig's user runs (package config's OIDC or Static).
type Login interface {
	Args() []string
}

// Build returns a kubeconfig with one cluster, user and context named name,
// whose user runs pinniped with login's arguments. No secret is ever put
// there: a static token appears only if the admin passed it literally.
func Build(name string, server string, caBundle []byte, pinniped Exec, login Login) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cluster := clientcmdapi.NewCluster()
	cluster.Server = server
	cluster.CertificateAuthorityData = caBundle
	cfg.Clusters[name] = cluster
	user := clientcmdapi.NewAuthInfo()
	user.Exec = &clientcmdapi.ExecConfig{
		// v1beta1, not v1: upstream Pinniped's CLI answers only v1beta1, and
		// kubectl refuses an answer in another version than it asked for,
		// so a kubeconfig asking v1 breaks for anyone running upstream's
		// binary (a mixed fleet, a rollback). Our login answers either, and
		// v1beta1 carries interactiveMode and provideClusterInfo as well.
		APIVersion:         ExecAPIVersion,
		Command:            pinniped.Path,
		Args:               login.Args(),
		Env:                []clientcmdapi.ExecEnvVar{{Name: ContextEnv, Value: name}},
		InstallHint:        pinniped.InstallHint,
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
