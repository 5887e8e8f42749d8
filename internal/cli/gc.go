package cli

import (
	"os"
	"runtime/debug"
)

// Garbage collection for the commands that read every project (status,
// project list): they decode page after page of objects and drop each at
// once, and at Go's default (GOGC=100) the collector took about 20% of
// their CPU at 10,000 projects. readHeavy lets the heap grow 4× past what
// is live before a collection, and never past readGCLimit (a soft limit:
// the collector works harder near it, nothing fails): at 10,000 projects
// 0.3 s less CPU for about 20 MB more peak memory, within the 250 MB
// budget (docs/benchmarks.md). GOGC and GOMEMLIMIT in the environment
// win. Long-running commands (the gateway, the wizard) keep Go's
// defaults.
const (
	readGCPercent = 400
	readGCLimit   = 180 << 20
)

func readHeavy() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(readGCPercent)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(readGCLimit)
	}
}
