// Package rawhttptest sends HTTP requests as raw bytes and HTTP/2 requests
// frame by frame, for tests of proxies that must refuse what Go's own
// clients never send (a Connection header over HTTP/2, header names in odd
// spellings, duplicates, HTTP/1.0).
package rawhttptest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Send writes req, a whole HTTP/1 request, to conn as is, and returns the
// response's status, or 0 when the server closed without answering.
func Send(t testing.TB, conn net.Conn, req string) int {
	t.Helper()
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// Get2 sends one HTTP/2 GET for path to the TLS server at addr with the extra
// header fields as given, and returns the response's status, or 0 when the
// server reset the stream or closed the connection instead.
func Get2(t testing.TB, addr, path string, extra []hpack.HeaderField) int {
	t.Helper()
	d := &tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}} //nolint:gosec // a test server's certificate
	conn, err := d.DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range append([]hpack.HeaderField{
		{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "https"}, {Name: ":authority", Value: "x"}, {Name: ":path", Value: path},
	}, extra...) {
		_ = enc.WriteField(f)
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	dec := hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return 0
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.RSTStreamFrame, *http2.GoAwayFrame:
			return 0
		case *http2.HeadersFrame:
			fields, err := dec.DecodeFull(f.HeaderBlockFragment())
			if err != nil {
				t.Fatal(err)
			}
			for _, hf := range fields {
				if hf.Name == ":status" {
					var code int
					_, _ = fmt.Sscan(hf.Value, &code)
					return code
				}
			}
		}
	}
}
