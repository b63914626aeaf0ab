// Command testserver is the e2e tests' own container image program (built static and packed
// onto an empty image by the test bed's image builder).
//
//	testserver hello                          print a greeting and sleep (the "pod runs" test)
//	testserver get --ca F URL                 GET URL over TLS trusting only F; exit 0 on 200
//	                                          (URL "kubernetes" means the API server's /healthz
//	                                          at $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT)
//	testserver serve --cert F --key F --group G --version V [--addr :8443]
//	                                          a minimal aggregated API server backend
//	testserver echo WORDS...                  print WORDS (for kubectl exec)
//	testserver cat                            copy stdin to stdout (kubectl exec -i)
//	testserver ticker [--addr :8080]          print "tick N" every second (kubectl logs -f) and
//	                                          answer HTTP on addr (kubectl port-forward)
//
// As an aggregated API backend it serves discovery for G/V (what kube-apiserver's
// availability check asks for) and /apis/G/V/whoami, which echoes what the aggregator told it
// about the caller: X-Remote-User/Group and the CN of the client certificate it presented.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: testserver hello | serve [flags]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "hello":
		fmt.Println("hello from the pinniped e2e test image")
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		<-sig
	case "get":
		if err := get(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "testserver:", err)
			os.Exit(1)
		}
	case "echo":
		fmt.Println(strings.Join(os.Args[2:], " "))
	case "cat":
		if _, err := io.Copy(os.Stdout, os.Stdin); err != nil {
			fmt.Fprintln(os.Stderr, "testserver:", err)
			os.Exit(1)
		}
	case "ticker":
		if err := ticker(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "testserver:", err)
			os.Exit(1)
		}
	case "serve":
		if err := serve(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "testserver:", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintf(os.Stderr, "testserver: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

func get(args []string) error {
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	caFile := fs.String("ca", "", "CA bundle to trust")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("get: want one URL")
	}
	url := fs.Arg(0)
	if url == "kubernetes" {
		url = "https://" + net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")) + "/healthz"
	}
	pem, err := os.ReadFile(*caFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("no certificates in %s", *caFile)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil) //nolint:gosec // G704: fetching the given URL is this command's job
	if err != nil {
		return err
	}
	resp, err := c.Do(req) //nolint:gosec // G704: as above
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	fmt.Printf("GET %s: %s\n", url, resp.Status)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	certFile := fs.String("cert", "", "serving certificate")
	keyFile := fs.String("key", "", "serving key")
	group := fs.String("group", "", "API group")
	version := fs.String("version", "v1alpha1", "API version")
	addr := fs.String("addr", ":8443", "listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	gv := *group + "/" + *version
	mux := http.NewServeMux()
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/apis", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{"kind": "APIGroupList", "apiVersion": "v1", "groups": []any{map[string]any{
			"name": *group, "versions": []any{map[string]any{"groupVersion": gv, "version": *version}},
			"preferredVersion": map[string]any{"groupVersion": gv, "version": *version},
		}}})
	})
	mux.HandleFunc("/apis/"+gv, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": []any{}})
	})
	mux.HandleFunc("/apis/"+gv+"/whoami", func(w http.ResponseWriter, r *http.Request) {
		cn := ""
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			cn = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		writeJSON(w, map[string]any{"user": r.Header.Get("X-Remote-User"), "groups": r.Header.Values("X-Remote-Group"), "clientCertCN": cn})
	})
	srv := &http.Server{
		Addr:              *addr,
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		// Ask for (but do not verify) a client certificate so that whoami can report the
		// aggregator's front-proxy identity; a real backend verifies it against the
		// requestheader CA from extension-apiserver-authentication.
		TLSConfig: &tls.Config{ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12},
	}
	fmt.Println("serving", gv, "on", *addr)
	return srv.ListenAndServeTLS(*certFile, *keyFile)
}

func ticker(args []string) error {
	fs := flag.NewFlagSet("ticker", flag.ContinueOnError)
	addr := fs.String("addr", ":8080", "HTTP listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	srv := &http.Server{Addr: *addr, ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "hello through port-forward %q\n", r.URL.Path) //nolint:gosec // G705: a plain-text test answer
	})}
	errCh := make(chan error, 1)
	go func() { errCh <- srv.ListenAndServe() }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-t.C:
			fmt.Printf("tick %d\n", n)
		case err := <-errCh:
			return err
		case <-sig:
			return nil
		}
	}
}
