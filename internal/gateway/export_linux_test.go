package gateway

// LoopCount is the number of event loops a gateway runs.
func LoopCount() int { return loopCount() }
