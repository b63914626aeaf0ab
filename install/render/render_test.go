package render_test

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/pinniped-kit/pinniped/install/render"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := "testdata/" + name
	if *update {
		if err := os.WriteFile(path, got, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./install/render -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the rendered output; if the change is intended, run: go test ./install/render -update", path)
	}
}

func TestGoldenManifests(t *testing.T) {
	cases := map[string]render.Config{
		"default.yaml": {Image: "ghcr.io/pinniped-kit/pinniped-agent:v1.0.0", Version: "v1.0.0"},
		"jwt.yaml": {Image: "localhost/pinniped-agent:dev", Namespace: "auth", Replicas: 1, ImagePullPolicy: "Never",
			OIDCIssuer: "https://dex.example.com", OIDCAudience: "cluster-1", OIDCCABundle: []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"),
			UsernameClaim: "email", GroupsClaim: "groups", AuthenticatorName: "dex"},
		"webhook.yaml": {Image: "img", WebhookEndpoint: "https://hook.example.com/authenticate"},
		// Without the helper: no kube-system Role, no pods/exec, no Deployments.
		"no-kube-cert-agent.yaml": {Image: "img", NoKubeCertAgent: true},
		// Beside a Concierge or agent with the default groups: renamed
		// groups, suffixed cluster-wide names, the suffix label.
		"suffix.yaml": {Image: "img", Namespace: "pinniped-tuna", GroupSuffix: "tuna.io",
			OIDCIssuer: "https://dex.example.com", OIDCAudience: "cluster-1", AuthenticatorName: "dex"},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			objs, err := render.Render(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := render.WriteYAML(&buf, objs, "rendered by a test"); err != nil {
				t.Fatal(err)
			}
			golden(t, name, buf.Bytes())
			// Every document must parse back, labelled for uninstall.
			for _, doc := range strings.Split(buf.String(), "\n---\n")[1:] {
				var m map[string]any
				if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
					t.Fatalf("document does not parse: %v\n%s", err, doc)
				}
				labels, _ := m["metadata"].(map[string]any)["labels"].(map[string]any)
				if labels[render.PartOfLabel] != render.PartOfValue {
					t.Errorf("%v %v lacks the %s label", m["kind"], m["metadata"].(map[string]any)["name"], render.PartOfLabel)
				}
			}
		})
	}
}

func TestEveryRuleIsExplained(t *testing.T) {
	objs, err := render.Render(render.Config{Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if k := o.GetKind(); k != "ClusterRole" && k != "Role" {
			continue
		}
		rules, _ := o.Object["rules"].([]any)
		if len(rules) == 0 || len(o.RuleReasons) != len(rules) {
			t.Errorf("%s %s: %d rules, %d reasons", o.GetKind(), o.GetName(), len(rules), len(o.RuleReasons))
		}
	}
}

func TestBadInput(t *testing.T) {
	cases := map[string]render.Config{
		"no image":              {},
		"http issuer":           {Image: "i", OIDCIssuer: "http://dex", OIDCAudience: "a"},
		"issuer no audience":    {Image: "i", OIDCIssuer: "https://dex"},
		"audience no issuer":    {Image: "i", OIDCAudience: "a"},
		"two authenticators":    {Image: "i", OIDCIssuer: "https://dex", OIDCAudience: "a", WebhookEndpoint: "https://hook"},
		"bad namespace":         {Image: "i", Namespace: "Not_Valid"},
		"bad pull policy":       {Image: "i", ImagePullPolicy: "Sometimes"},
		"bad memory":            {Image: "i", MemoryLimit: "lots"},
		"http webhook":          {Image: "i", WebhookEndpoint: "http://hook"},
		"bad authenticator":     {Image: "i", OIDCIssuer: "https://dex", OIDCAudience: "a", AuthenticatorName: "UPPER"},
		"negative replicas":     {Image: "i", Replicas: -1},
		"webhook CA no webhook": {Image: "i", WebhookCABundle: []byte("x")},
		"suffix without a dot":  {Image: "i", GroupSuffix: "tuna"},
		"suffix not DNS":        {Image: "i", GroupSuffix: "Tuna.IO"},
		"kube-system":           {Image: "i", Namespace: "kube-system"},
		"kube-public":           {Image: "i", Namespace: "kube-public"},
	}
	for name, cfg := range cases {
		if _, err := render.Render(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
