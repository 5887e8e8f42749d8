//go:build linux

package lock

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

type statFacts struct {
	pid    int
	start  uint64
	zombie bool
}

// procStat reads pid, state and start time from /proc/PID/stat. The second
// field (comm) is in parentheses and may itself hold spaces and
// parentheses, so fields are counted from the last ')'.
func procStat(pid int) (statFacts, error) {
	return readStat(fmt.Sprintf("/proc/%d/stat", pid))
}

func readStat(path string) (statFacts, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return statFacts{}, err
	}
	s := string(b)
	open, end := strings.IndexByte(s, ' '), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return statFacts{}, fmt.Errorf("%s: unexpected format", path)
	}
	pid, err := strconv.Atoi(s[:open])
	if err != nil {
		return statFacts{}, fmt.Errorf("%s: pid: %w", path, err)
	}
	// Fields from 3 (state) on; starttime is field 22.
	f := strings.Fields(s[end+1:])
	if len(f) < 20 {
		return statFacts{}, fmt.Errorf("%s: %d fields after comm", path, len(f))
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return statFacts{}, fmt.Errorf("%s: starttime: %w", path, err)
	}
	return statFacts{pid: pid, start: start, zombie: f[0] == "Z" || f[0] == "X"}, nil
}

var self = sync.OnceValues(func() (procFacts, bool) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return procFacts{}, false
	}
	boot := strings.TrimSpace(string(b))
	link, err := os.Readlink("/proc/self/ns/pid")
	if err != nil || !strings.HasPrefix(link, "pid:[") || !strings.HasSuffix(link, "]") {
		return procFacts{}, false
	}
	ns, err := strconv.ParseUint(link[len("pid:["):len(link)-1], 10, 64)
	if err != nil {
		return procFacts{}, false
	}
	st, err := readStat("/proc/self/stat")
	// A /proc mounted for another pid namespace would name other
	// processes: then no pid read through it proves anything.
	if err != nil || st.pid != os.Getpid() || boot == "" {
		return procFacts{}, false
	}
	return procFacts{boot: boot, pidns: ns, pid: st.pid, start: st.start}, true
})

// selfFacts are this process's boot id, pid namespace, pid and start time;
// ok is false when /proc cannot tell them reliably.
func selfFacts() (procFacts, bool) { return self() }
