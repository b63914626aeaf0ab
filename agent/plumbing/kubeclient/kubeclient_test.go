package kubeclient_test

import (
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pinniped-kit/pinniped/agent/plumbing/kubeclient"
)

func TestServesTheAgentsGroups(t *testing.T) {
	c, err := kubeclient.New(&rest.Config{Host: "https://127.0.0.1:6443"})
	if err != nil {
		t.Fatal(err)
	}
	var kube kubernetes.Interface = c
	for name, group := range map[string]any{
		"core": kube.CoreV1(), "apps": kube.AppsV1(), "authentication": kube.AuthenticationV1(),
		"authorization": kube.AuthorizationV1(), "certificates": kube.CertificatesV1(), "coordination": kube.CoordinationV1(),
	} {
		if group == nil {
			t.Errorf("%s: no client", name)
		}
	}
	// Every group shares one HTTP client, so one connection pool.
	if kube.CoreV1().RESTClient().(*rest.RESTClient).Client != kube.CoordinationV1().RESTClient().(*rest.RESTClient).Client {
		t.Error("groups do not share the HTTP client")
	}
}
