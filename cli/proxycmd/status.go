package proxycmd

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/pinniped-kit/pinniped/cli/localproxy/state"
)

// PrintStatus writes `pinniped status`'s lines about the proxy whose
// state directory is dir: running (pid, address, each context's state and
// credential expiry) or not. It reads files only: no network, no secret,
// no identity.
func PrintStatus(w io.Writer, dir string, now time.Time) error {
	rep, err := state.Status(dir)
	if err != nil {
		return fmt.Errorf("pinniped proxy: %w", err)
	}
	switch {
	case rep.Stale:
		fmt.Fprintf(w, "pinniped proxy: not running (a proxy stopped without cleaning up; its state in %s is stale). Start it with `pinniped proxy`.\n", dir)
		return nil
	case !rep.Running:
		fmt.Fprintln(w, "pinniped proxy: not running (start it with `pinniped proxy`)")
		return nil
	case rep.State == nil:
		fmt.Fprintln(w, "pinniped proxy: running (starting up)")
		return nil
	}
	s := rep.State
	fmt.Fprintf(w, "pinniped proxy: running (pid %d) at %s since %s, %d contexts:\n", s.PID, s.Address, s.Started.Local().Format(time.DateTime), len(s.Contexts))
	slugs := make([]string, 0, len(s.Contexts))
	for slug := range s.Contexts {
		slugs = append(slugs, slug)
	}
	sort.Slice(slugs, func(i, j int) bool { return s.Contexts[slugs[i]].Context < s.Contexts[slugs[j]].Context })
	for _, slug := range slugs {
		c := s.Contexts[slug]
		line := fmt.Sprintf("  %-30s %s  %s", c.Context, c.Server, c.State)
		switch {
		case c.Expires.IsZero() && c.Renewals > 0:
			line += ", credential without expiry"
		case !c.Expires.IsZero() && !now.Before(c.Expires):
			line += fmt.Sprintf(", credential expired at %s", c.Expires.Local().Format(time.Kitchen))
		case !c.Expires.IsZero():
			line += fmt.Sprintf(", credential expires in %s (%s)", c.Expires.Sub(now).Round(time.Second), c.Expires.Local().Format(time.Kitchen))
		}
		if c.Problem != "" {
			line += ": " + c.Problem
		}
		fmt.Fprintln(w, line)
	}
	return nil
}
