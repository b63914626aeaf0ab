// Package credentialttl holds the bounds of the lifetime of the client
// certificates the agent issues (its --credential-ttl), shared by the agent,
// which enforces them, and `pinniped install`, which must refuse what the
// agent would refuse before anything reaches a cluster. Standard library
// only: the CLI links it.
package credentialttl

import (
	"fmt"
	"strings"
	"time"
)

// Default is the lifetime when none is chosen, as upstream's Concierge.
// Short, because a client certificate cannot be revoked.
const Default = 5 * time.Minute

// Min is the shortest lifetime the agent takes: shorter, and a client's
// clock a little behind sees its credential expire before it is used.
const Min = time.Minute

// Max is the longest lifetime the agent takes. A certificate stays valid
// for its whole lifetime after its user is removed at the identity provider
// or logs out, so a day bounds that delay.
const Max = 24 * time.Hour

// MinCSR is the shortest lifetime the certificates API grants
// (spec.expirationSeconds); the CSR strategy raises shorter ones to it.
const MinCSR = 10 * time.Minute

// Check says why d is not a lifetime the agent takes, and what to choose.
func Check(d time.Duration) error {
	switch {
	case d < Min:
		return fmt.Errorf("%s is shorter than the minimum, %s: choose a lifetime from %s to %s (default %s)",
			Format(d), Format(Min), Format(Min), Format(Max), Format(Default))
	case d > Max:
		return fmt.Errorf("%s is longer than the maximum, %s: a certificate cannot be revoked, so choose a lifetime from %s to %s (default %s)",
			Format(d), Format(Max), Format(Min), Format(Max), Format(Default))
	}
	return nil
}

// Format writes d as a person would ("24h", "10m", "1m30s"), not as
// time.Duration.String does ("24h0m0s"); the agent parses either.
func Format(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
