package lock

import (
	"fmt"
	"os"
	"os/user"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
)

// A holder identity reads as a sentence and ends with the facts that prove
// whether its process is alive, for example
//
//	kiln create dev1 by alice@laptop pid 4242 [boot=5c1e…-… pidns=4026531836 start=873412 n=1]
//
// boot is the kernel's boot id, pidns the inode of the holder's pid
// namespace, start the process start time (clock ticks since boot, field 22
// of /proc/PID/stat) and n numbers the acquisitions of this process, so an
// identity names one acquisition: a request whose answer was lost and that
// finds the lease held by this identity knows it is its own.
//
// A hostname proves nothing (CI pods and containers run with --uts=host
// share one), so an identity without these facts, or with facts from
// another boot or pid namespace, is never declared dead: its lease is taken
// over only once it has stayed unrenewed for its duration.

var acquisitions atomic.Int64

// self is what this process writes into its identities.
type procFacts struct {
	boot  string
	pidns uint64
	pid   int
	start uint64
}

// Identity is a fresh holder identity of this process for operation.
func Identity(operation string) string {
	host, _ := os.Hostname()
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	s := fmt.Sprintf("kiln %s by %s@%s pid %d", operation, name, host, os.Getpid())
	n := acquisitions.Add(1)
	if f, ok := selfFacts(); ok {
		return fmt.Sprintf("%s [boot=%s pidns=%d start=%d n=%d]", s, f.boot, f.pidns, f.start, n)
	}
	return fmt.Sprintf("%s [n=%d]", s, n)
}

// Who is the readable part of a holder identity, for messages.
func Who(holder string) string {
	if i := strings.LastIndex(holder, " ["); i >= 0 && strings.HasSuffix(holder, "]") {
		return holder[:i]
	}
	return holder
}

var factsRE = regexp.MustCompile(` pid (\d+) \[boot=([0-9a-f-]+) pidns=(\d+) start=(\d+) n=\d+\]$`)

// parseFacts reads the process facts out of a holder identity; ok is false
// for identities without them (other systems, older kiln, not kiln).
func parseFacts(holder string) (procFacts, bool) {
	m := factsRE.FindStringSubmatch(holder)
	if m == nil {
		return procFacts{}, false
	}
	pid, err1 := strconv.Atoi(m[1])
	ns, err2 := strconv.ParseUint(m[3], 10, 64)
	start, err3 := strconv.ParseUint(m[4], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || pid <= 0 {
		return procFacts{}, false
	}
	return procFacts{boot: m[2], pidns: ns, pid: pid, start: start}, true
}

// deadHolder reports whether holder is provably a process that no longer
// runs: same boot and pid namespace as this process (so its pid means the
// same process table), and that pid is gone, a zombie, or a different
// process (another start time). Anything else is not proof.
func deadHolder(holder string) bool {
	h, ok := parseFacts(holder)
	if !ok {
		return false
	}
	me, ok := selfFacts()
	if !ok || h.boot != me.boot || h.pidns != me.pidns {
		return false
	}
	if h.pid == me.pid {
		return h.start != me.start // this pid is us: the holder was an earlier process
	}
	st, err := procStat(h.pid)
	if err != nil {
		return os.IsNotExist(err)
	}
	return st.zombie || st.start != h.start
}
