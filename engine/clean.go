package engine

import "github.com/kilnctl/kiln/engine/event"

// CleanText removes what could drive a terminal or disguise text from a
// string that may come from a cluster (see event.CleanText).
func CleanText(s string) string { return event.CleanText(s) }

// cleanDeep applies CleanText to every string reachable from v (a
// pointer): every status a frontend receives goes through it, as every
// event does in the Reporter.
func cleanDeep(v any) { event.CleanDeep(v) }
