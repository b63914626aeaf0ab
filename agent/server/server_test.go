package server

import (
	"strings"
	"testing"
	"time"
)

func TestOptionsValidate(t *testing.T) {
	good := Options{Namespace: "pinniped", CertTTL: 5 * time.Minute, ListenAddress: ":10250", HealthListenAddress: ":8080", ProxyListenAddress: ":8444"}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		change func(*Options)
		want   string
	}{
		"no namespace":    {func(o *Options) { o.Namespace = "" }, "--namespace is required"},
		"ttl too short":   {func(o *Options) { o.CertTTL = time.Second }, "--credential-ttl"},
		"ttl too long":    {func(o *Options) { o.CertTTL = 48 * time.Hour }, "--credential-ttl"},
		"listen not addr": {func(o *Options) { o.ListenAddress = "10250" }, "--listen"},
		"proxy not addr":  {func(o *Options) { o.ProxyListenAddress = "localhost" }, "--proxy-listen"},
		"health not addr": {func(o *Options) { o.HealthListenAddress = "" }, "--health-listen"},
		"bad suffix":      {func(o *Options) { o.GroupSuffix = "nodot" }, "--api-group-suffix"},
		"proxy cred":      {func(o *Options) { o.ProxyCredential = "Token" }, "--proxy-credential"},
	} {
		o := good
		c.change(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}
