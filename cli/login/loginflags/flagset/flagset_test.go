package flagset

import (
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/pinniped-kit/pinniped/cli/login/loginflags"
)

// withPflag parses args as the engine's cobra command does.
func withPflag(flags []loginflags.Flag, args []string) bool {
	fs := pflag.NewFlagSet("login", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	Add(fs, flags)
	return fs.Parse(args) == nil && fs.NArg() == 0
}

// kubeconfigArgs is what `pinniped get kubeconfig` writes, in both forms.
var kubeconfigArgs = [][]string{
	{"--issuer=https://dex.example.com", "--client-id=pinniped-cli", "--scopes=openid,offline_access,groups",
		"--ca-bundle-data=QUJD", "--request-audience=cluster-1", "--enable-concierge",
		"--concierge-endpoint=https://10.0.0.1:6443", "--concierge-ca-bundle-data=REVG",
		"--concierge-api-group-suffix=pinniped.dev", "--concierge-authenticator-type=jwt",
		"--concierge-authenticator-name=dex", "--credential-cache=file"},
	{"--issuer", "https://dex.example.com", "--scopes", "openid", "--scopes", "email,groups", "--ca-bundle", "/tmp/ca.pem",
		"--listen-port", "48095", "--skip-browser=true", "--timeout", "90s", "--enable-concierge=false", "--flow", "device",
		"--session-cache", "/tmp/sessions.yaml", "--debug-session-cache"},
	{},
}

func TestParseAgreesOnKubeconfigArgs(t *testing.T) {
	for _, args := range kubeconfigArgs {
		var fast, full loginflags.OIDC
		if !loginflags.Parse(fast.Flags(), args) {
			t.Errorf("Parse declined %q; the front would hand every kubectl call to the engine", args)
		}
		if !withPflag(full.Flags(), args) {
			t.Fatalf("pflag refused %q", args)
		}
		if !reflect.DeepEqual(fast, full) {
			t.Errorf("%q:\nParse %+v\npflag %+v", args, fast, full)
		}
	}
}

func TestParseDeclinesWhatItIsUnsureOf(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"-h"}, {"--issuer"}, {"--unknown=1"}, {"positional"}, {"--", "x"}, {"--"},
		{"-issuer=https://x"}, {"---issuer=https://x"}, {"--scopes=\"a,b\""}, {"--listen-port=010"},
		{"--listen-port=0x10"}, {"--listen-port=-1"}, {"--skip-browser", "false"}, {"--skip-browser=maybe"},
		{"--timeout=soon"},
	} {
		var o loginflags.OIDC
		if loginflags.Parse(o.Flags(), args) {
			t.Errorf("Parse accepted %q", args)
		}
	}
}

func TestStaticFlags(t *testing.T) {
	args := []string{"--token-env", "TOKEN", "--enable-concierge", "--concierge-endpoint=https://10.0.0.1:6443",
		"--concierge-authenticator-type=webhook", "--concierge-authenticator-name=hook"}
	var fast, full loginflags.Static
	if !loginflags.Parse(fast.Flags(), args) || !withPflag(full.Flags(), args) {
		t.Fatalf("a parser refused %q", args)
	}
	if !reflect.DeepEqual(fast, full) || fast.Login.CredentialCache != "keyring" || fast.Concierge.Login.APIGroupSuffix != "pinniped.dev" {
		t.Errorf("Parse %+v\npflag %+v", fast, full)
	}
}

// FuzzParseMatchesPflag: whenever the front's parser accepts a command line,
// pflag (the engine) accepts it too and reads the same values. Otherwise
// the front could answer from a cache entry the engine would never use.
func FuzzParseMatchesPflag(f *testing.F) {
	for _, args := range kubeconfigArgs {
		f.Add(true, strings.Join(args, "\x00"))
	}
	for _, seed := range []string{
		"--scopes=\x00--scopes=a,,b", "--scopes= a, b\x00--ca-bundle-data=x,y", "--listen-port=0\x00--listen-port=65535",
		"--timeout=1h2m3.5s", "--skip-browser=T\x00--skip-listen=0", "--scopes=a\"b", "--issuer=--client-id",
		"--issuer\x00--client-id", "--scopes=\xff,\x00", "--timeout=-5s", "--listen-port=999999999",
	} {
		f.Add(true, seed)
		f.Add(false, seed)
	}
	for _, seed := range []string{
		"--token=a\x00--token-env=B", "--token\x00--enable-concierge", "--enable-concierge=F\x00--concierge-endpoint",
		"--credential-cache=file\x00--credential-cache=none", "--concierge-api-group-suffix=\x00--token=--token",
	} {
		f.Add(false, seed)
	}
	f.Fuzz(func(t *testing.T, oidc bool, joined string) {
		args := strings.Split(joined, "\x00")
		if joined == "" {
			args = nil
		}
		var fast, full any
		var fastFlags, fullFlags []loginflags.Flag
		if oidc {
			a, b := &loginflags.OIDC{}, &loginflags.OIDC{}
			fast, full, fastFlags, fullFlags = a, b, a.Flags(), b.Flags()
		} else {
			a, b := &loginflags.Static{}, &loginflags.Static{}
			fast, full, fastFlags, fullFlags = a, b, a.Flags(), b.Flags()
		}
		if !loginflags.Parse(fastFlags, args) {
			return
		}
		if !withPflag(fullFlags, args) {
			t.Fatalf("Parse accepted %q, pflag refuses it", args)
		}
		if !reflect.DeepEqual(fast, full) {
			t.Fatalf("%q:\nParse %+v\npflag %+v", args, fast, full)
		}
	})
}

func TestParseStatic(t *testing.T) {
	env := func(k string) (string, bool) { return map[string]string{"TOKEN": "s3cret"}[k], k == "TOKEN" }
	s, err := ParseStatic([]string{"--token-env=TOKEN", "--enable-concierge", "--concierge-endpoint=https://10.0.0.1:6443",
		"--concierge-authenticator-type=webhook", "--concierge-authenticator-name=hook"}, env)
	if err != nil || s.Token != "s3cret" || s.Concierge == nil || s.Concierge.AuthenticatorName != "hook" || s.Validate() != nil {
		t.Fatalf("%+v %v", s, err)
	}
	for _, args := range [][]string{{"--token-env=UNSET"}, {"--nope"}, {"--token=x", "positional"}} {
		if _, err := ParseStatic(args, env); err == nil {
			t.Errorf("%q parsed", args)
		}
	}
}

// TestParseErrorsNeverEchoValues: whatever is wrong with the arguments,
// the error names the flag at fault but holds no argument's value (a
// kubeconfig's arguments may hold a token).
func TestParseErrorsNeverEchoValues(t *testing.T) {
	const secret = "positional-secret-value-123"
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--issuer=https://x.example.com", secret}, "1 unexpected argument"},
		{[]string{"--", secret, secret + "-2"}, "2 unexpected arguments"},
		{[]string{"--tokn=" + secret}, "unknown flag --tokn"},
		{[]string{"-t" + secret}, "single-dash"},
		{[]string{"--listen-port=" + secret}, "--listen-port is not a valid int"},
		{[]string{"--listen-port"}, "--listen-port needs a value"},
		{[]string{"---" + secret}, "bad flag syntax"},
	} {
		_, err := ParseOIDC(tc.args, func(string) string { return "" })
		if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%q: %v (want %q, and no value)", tc.args, err, tc.says)
		}
		_, err = ParseStatic(tc.args, func(string) (string, bool) { return "", false })
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("static %q: %v", tc.args, err)
		}
	}
}

func TestSecretArgs(t *testing.T) {
	for _, tc := range []struct {
		args, want []string
	}{
		{[]string{"--token=", "positional-secret-value-123"}, []string{"", "positional-secret-value-123"}},
		{[]string{"--token", "t0k3n", "--token-env", "TEAM_TOKEN", "--credential-cache", "file"}, []string{"t0k3n"}},
		{[]string{`--client-secret=ab"cd\efgh`, "--issuer", "https://x", "--enable-concierge", "stray"}, []string{`ab"cd\efgh`, "stray"}},
		{[]string{"--skip-browser", "--", "--token=after", "x"}, []string{"--token=after", "x"}},
		{[]string{"--my-password", "p4ss", "--unknown", "maybe"}, []string{"p4ss", "maybe"}},
		{[]string{"--unknown=value-of-unknown"}, []string{"value-of-unknown"}},
	} {
		if got := SecretArgs(tc.args); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %q, want %q", tc.args, got, tc.want)
		}
	}
}
