//go:build !linux

package lock

import "errors"

type statFacts struct {
	pid    int
	start  uint64
	zombie bool
}

// Without /proc there are no facts that prove a holder dead: identities
// carry none, and leases are taken over only after they expire.
func procStat(int) (statFacts, error) { return statFacts{}, errors.New("no /proc") }

func selfFacts() (procFacts, bool) { return procFacts{}, false }
