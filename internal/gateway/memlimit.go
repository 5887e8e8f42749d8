package gateway

import (
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
)

// MemoryLimitEnv carries the container's memory limit in bytes (the
// platform sets it from the Deployment's resources with the downward API).
const MemoryLimitEnv = "KILN_MEMORY_LIMIT"

// SetMemoryLimit makes the Go runtime honour the container's memory limit:
// a soft limit at 90% of it (GOMEMLIMIT semantics), so the collector works
// harder before the kernel kills the gateway. An explicit GOMEMLIMIT wins.
func SetMemoryLimit(log *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	v := os.Getenv(MemoryLimitEnv)
	if v == "" {
		return
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		log.Warn("ignoring a memory limit that is not a number of bytes", "env", MemoryLimitEnv, "value", v)
		return
	}
	soft := n / 10 * 9
	debug.SetMemoryLimit(soft)
	log.Info("memory limit", "container_bytes", n, "soft_limit_bytes", soft)
}
