// Package procstat reads what the fault tests and the soak watch of a
// process from /proc: resident memory, threads, open fds, and the
// processes below it; and the list of processes.
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Sample is one reading of a process.
type Sample struct {
	RSSKiB, FDs, Threads int
	AnonKiB              int // of RSSKiB, not backed by a file (the binary's pages are)
}

func (s Sample) String() string {
	return fmt.Sprintf("RSS %.1f MiB (%.1f anonymous), %d fds, %d threads", float64(s.RSSKiB)/1024, float64(s.AnonKiB)/1024, s.FDs, s.Threads)
}

// Read reads pid's resident memory, threads and open fds.
func Read(pid int) (Sample, error) {
	var s Sample
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, fmt.Errorf("process %d: %w", pid, err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.Atoi(f[0])
		switch k {
		case "VmRSS":
			s.RSSKiB = n
		case "RssAnon":
			s.AnonKiB = n
		case "Threads":
			s.Threads = n
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, fmt.Errorf("process %d: %w", pid, err)
	}
	s.FDs = len(fds)
	return s, nil
}

// Proc is a process as /proc/PID/stat names it.
type Proc struct {
	PID, PPID int
	Comm      string
}

// All lists the processes on the machine now; those that exit while it
// reads are left out.
func All() []Proc {
	var out []Proc
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		out = append(out, Proc{PID: p, PPID: pp, Comm: s[open+1 : end]})
	}
	return out
}

// Descendants returns the pids of every process below pid.
func Descendants(pid int) []int {
	children := map[int][]int{}
	for _, p := range All() {
		children[p.PPID] = append(children[p.PPID], p.PID)
	}
	var out []int
	for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}
