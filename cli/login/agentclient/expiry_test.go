package agentclient

import (
	"net/http"
	"testing"
	"time"
)

func TestLocalExpiry(t *testing.T) {
	sent := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC) // this machine's clock
	life := 10 * time.Minute
	date := func(d time.Time) string { return d.Format(http.TimeFormat) }
	for _, c := range []struct {
		name      string
		serverNow time.Time
		exp       time.Time
		header    string
		want      time.Time
	}{
		{name: "clocks agree: the expiry as stated", serverNow: sent, exp: sent.Add(5 * time.Minute), want: sent.Add(5 * time.Minute)},
		{name: "this machine 2 minutes behind: earlier here",
			serverNow: sent.Add(2 * time.Minute), exp: sent.Add(7 * time.Minute), want: sent.Add(5*time.Minute - time.Second)},
		{name: "this machine 2 minutes ahead: later here",
			serverNow: sent.Add(-2 * time.Minute), exp: sent.Add(3 * time.Minute), want: sent.Add(5*time.Minute - time.Second)},
		{name: "no Date header: as stated", header: "-", exp: sent.Add(5 * time.Minute), want: sent.Add(5 * time.Minute)},
		{name: "a Date years back would cache it for years: as stated",
			serverNow: sent.AddDate(-20, 0, 0), exp: sent.Add(5 * time.Minute), want: sent.Add(5 * time.Minute)},
		{name: "a Date after the expiry would hand out dead credentials: as stated",
			serverNow: sent.Add(time.Hour), exp: sent.Add(5 * time.Minute), want: sent.Add(5 * time.Minute)},
		{name: "a remaining life longer than the certificate's lifetime: as stated",
			serverNow: sent.Add(-9 * time.Minute), exp: sent.Add(5 * time.Minute), want: sent.Add(5 * time.Minute)},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := c.header
			switch h {
			case "":
				h = date(c.serverNow)
			case "-":
				h = ""
			}
			if got := localExpiry(c.exp, h, sent, life); !got.Equal(c.want) {
				t.Errorf("localExpiry = %v, want %v", got, c.want)
			}
		})
	}
}
