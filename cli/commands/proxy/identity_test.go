package proxy_test

import (
	"context"
	"encoding/pem"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pinniped-kit/pinniped/cache/sessions"
	"github.com/pinniped-kit/pinniped/cli/credstore"
	"github.com/pinniped-kit/pinniped/cli/front/handoff"
	"github.com/pinniped-kit/pinniped/cli/localproxy/localproxytest"
	"github.com/pinniped-kit/pinniped/cli/localproxy/targets"
)

// TestRenewalLinesNameNoIdentity: the proxy prints one line per renewal
// and promises never an identity. An OIDC context whose session kubectl
// cached (no network needed) gets its credential from the login runner,
// whose summary names the user and groups: the proxy must not print them.
func TestRenewalLinesNameNoIdentity(t *testing.T) {
	dir := t.TempDir()
	a := localproxytest.NewAPIServer(t)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	stateDir := filepath.Join(dir, "state")

	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.Certificate().Raw})
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: a.URL, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["sso"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1", Command: "pinniped",
		Args:            []string{"login", "oidc", "--issuer=https://issuer.example", "--client-id=cli", "--credential-cache=file"},
		InteractiveMode: clientcmdapi.IfAvailableExecInteractiveMode,
	}}
	cfg.Contexts["sso"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "sso"}
	cfg.CurrentContext = "sso"
	kc := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}

	// The session a `pinniped login oidc` left in the file cache.
	ts, _, err := targets.Build(*cfg, targets.Options{IsFront: handoff.IsFront, LookupEnv: os.LookupEnv})
	if err != nil || len(ts) != 1 || ts[0].Login.OIDC == nil {
		t.Fatalf("targets: %v, %v", ts, err)
	}
	places := credstore.Places{Getenv: os.Getenv}
	store, err := places.Open("file", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	lockDir, err := places.LockDir("file")
	if err != nil {
		t.Fatal(err)
	}
	const user, group = "alice-the-user", "payroll-admins"
	if err := (&sessions.Cache{Store: store, LockDir: lockDir}).Put(context.Background(), ts[0].Login.OIDC.SessionKey(), &sessions.Tokens{
		IDToken: "id-token", IDTokenExpiry: time.Now().Add(time.Hour), Username: user, Groups: []string{group},
	}); err != nil {
		t.Fatal(err)
	}

	ctx, stop := context.WithCancel(context.Background())
	var stdout, stderr localproxytest.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, &stdout, &stderr, "proxy", "--kubeconfig", kc, "--listen=127.0.0.1:0", "--state-dir", stateDir)
	}()
	waitReady(t, stateDir, done, &stderr)
	stop()
	if code := <-done; code != 0 {
		t.Fatalf("the proxy stopped with exit %d:\n%s", code, stderr.String())
	}
	out := stderr.String()
	if !strings.Contains(out, "sso: new credential (#1)") {
		t.Fatalf("no renewal line:\n%s", out)
	}
	if strings.Contains(out, user) || strings.Contains(out, group) {
		t.Errorf("the proxy printed an identity:\n%s", out)
	}
}
