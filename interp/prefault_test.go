package interp_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ansible-bridge/ansible-bridge/interp"
)

// prefaultCheck runs in python with the agent's functions loaded. A child
// forked from this process writes to a buffer; the pages it reports as its
// own must include the buffer's. A second child, its Prefaulter taught
// those pages, must own them after prefault() and before writing a byte
// (they were copied ahead, as a spare fork copies them while it waits).
// As root, Prefaulters that pin them (all, or the anonymous ones where an
// older kernel refuses a file's) give a fork those pages at once, and
// prefault copies the rest.
const prefaultCheck = `
import mmap, os, sys
page = os.sysconf('SC_PAGE_SIZE')
assert page_ranges([1, 2, 3, 7, 8]) == [(page, 3 * page), (7 * page, 2 * page)], page_ranges([1, 2, 3, 7, 8])
assert page_ranges([]) == []
buf = bytearray(64 * page)
for i in range(0, len(buf), page):
    buf[i] = 1  # present in the parent, so shared after fork
import ctypes
addr = ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf))
first = (addr + page - 1) // page
want = set(range(first, first + 62))

def child(fn):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.write(w, repr(fn()).encode())
        finally:
            os._exit(0)
    os.close(w)
    out = b''
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        out += b
    os.waitpid(pid, 0)
    return eval(out)

def writer():
    for i in range(0, len(buf), page):
        buf[i] = 2
    return sorted(set(own_pages()) & want)

copied = child(writer)
assert copied == sorted(want), ('own_pages missed written pages', len(copied))

pf = Prefaulter()
if pf.madvise is None:
    print('SKIP no ctypes')
    sys.exit(0)
import array
pf.learn(array.array('Q', copied).tobytes())
assert pf.ranges == page_ranges(copied)
big = Prefaulter()
big.learn(array.array('Q', range(MAX_LEARN_PAGES + 1)).tobytes())
assert big.ranges == [] and not big.pages, 'an outsized report was learned'

def prefaulted():
    before = sorted(set(own_pages()) & want)
    pf.prefault()
    after = sorted(set(own_pages()) & want)
    return len(before), len(after)

before, after = child(prefaulted)
if after == 0 and tuple(int(x) for x in os.uname().release.split('.')[:2]) < (5, 14):
    print('SKIP kernel without MADV_POPULATE_WRITE')
    sys.exit(0)
assert before == 0, ('pages owned before prefault', before)
assert after == len(want), ('pages owned after prefault', after, len(want))
assert bytes(buf[:1]) == b'\x01', 'prefault changed the contents'

# As root, a seed pins the pages instead: its forks own them from the
# fork on, with the contents they had at the fork, and prefault copies
# the rest, if any: kernels before 6.4 pin no page of a file mapping
# (here a private one), and the seed then pins only the anonymous ones.
import tempfile, types
tmp = tempfile.TemporaryFile()
tmp.write(b'f' * 4 * page)
tmp.flush()
fmap = mmap.mmap(tmp.fileno(), 4 * page, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
faddr = ctypes.addressof((ctypes.c_char * len(fmap)).from_buffer(fmap))
fpages = [faddr // page + i for i in range(4)]
anon, rest = split_anonymous(page_ranges(sorted(copied + fpages)))
assert anon == page_ranges(copied) and rest == page_ranges(fpages), (anon, rest)
if not pin_charges_no_one():
    print('OK pins not tried: not root with CAP_IPC_LOCK in the initial user namespace')
    sys.exit(0)

def learned():
    pf = Prefaulter()
    pf.learn(array.array('Q', copied + fpages).tobytes())
    return pf

def owned_at_fork_and_after_prefault(pf):
    def counts():
        at_fork = len(set(own_pages()) & want), len(set(own_pages()) & set(fpages))
        pf.prefault()
        return at_fork, len(set(own_pages()) & set(fpages)), bytes(buf[page:page + 1]), bytes(fmap[:1])
    return child(counts)

# First the older kernel (a fork copies a page while any pin on it
# lasts, and a closed ring's pins go some time after).
old_kernel = learned()
real = old_kernel.libc.syscall
real.restype = ctypes.c_long
refused = []
def refuse_first_register(nr, *args):
    if nr == IO_URING_REGISTER and not refused:
        refused.append(nr)
        return -1
    return real(nr, *args)
old_kernel.libc = types.SimpleNamespace(syscall=refuse_first_register)
if not old_kernel.pin():
    print('OK io_uring refused: spares copy ahead instead')
    sys.exit(0)
assert refused and old_kernel.ranges == page_ranges(fpages), ('no second try with the anonymous pages', old_kernel.ranges)
buf[page] = 3
got = owned_at_fork_and_after_prefault(old_kernel)
assert got == ((len(want), 0), 4, b'\x03', b'f'), ('pinned anonymous pages: owned at the fork, file pages after prefault, contents', got)
os.close(old_kernel.pinned)

pinner = learned()
assert pinner.pin() and pinner.ranges in ([], page_ranges(fpages)), pinner.ranges
buf[page] = 4
got = owned_at_fork_and_after_prefault(pinner)
want_file = 4 if pinner.ranges == [] else 0
assert got == ((len(want), want_file), 4, b'\x04', b'f'), ('all pinned: owned at the fork, contents', got)
os.close(pinner.pinned)
print('OK')
`

// TestPrefault: the agent learns which pages a task copies on write, and a
// spare fork copies exactly those ahead without changing their contents;
// as root its seed pins them, and its forks own them from the fork on.
func TestPrefault(t *testing.T) {
	if _, err := os.Stat("/proc/self/pagemap"); err != nil {
		t.Skip("no /proc/self/pagemap")
	}
	dir := t.TempDir()
	agent := filepath.Join(dir, "agent.py")
	if err := os.WriteFile(agent, interp.AgentSource, 0o600); err != nil {
		t.Fatal(err)
	}
	script := "exec(compile(open(" + pyQuote(agent) + ").read(), 'agent.py', 'exec'))\n" + prefaultCheck
	for _, py := range pythons(t) {
		t.Run(py, func(t *testing.T) {
			out, err := exec.Command(py, "-c", script).CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			s := strings.TrimSpace(string(out))
			if rest, ok := strings.CutPrefix(s, "OK "); ok {
				t.Log(rest)
				s = "OK"
			}
			if s != "OK" {
				if strings.HasPrefix(s, "SKIP") {
					t.Skip(s)
				}
				t.Fatalf("unexpected output %q", s)
			}
		})
	}
}

// pyQuote quotes s as a Python string literal.
func pyQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// TestRootSeedPins: as root, a warm zygote's seed holds its learned pages
// pinned, and the task it forked holds neither pins nor the io_uring fd
// (its copies came with the fork).
func TestRootSeedPins(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a root seed pins")
	}
	var params [120]byte
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
	if errno != 0 {
		t.Skipf("io_uring refused here (%v): seeds copy ahead instead", errno)
	}
	unix.Close(int(fd))
	c := startAgent(t, agentEnv{Python: pythons(t)[0]})
	ctx := ctxT(t, 60*time.Second)
	w := fakeWrapper(t, map[string]any{})
	for i := 0; i < 6; i++ { // warm: pages learned, the seed forked knowing them
		mustForkedFrom(t, ctx, c, w)
	}
	res, err := c.RunModule(ctx, interp.ModuleRequest{Wrapper: parsed(t, w)})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	var task struct {
		PPID  int
		Fds   []string
		VmPin []string
	}
	if err := json.Unmarshal(res.Stdout, &task); err != nil {
		t.Fatalf("%v: %s", err, res.Stdout)
	}
	if kb := vmPinKiB(task.PPID); kb == 0 {
		t.Errorf("the seed %d that forked the task holds no pinned pages", task.PPID)
	}
	if slices.ContainsFunc(task.Fds, func(s string) bool { return strings.Contains(s, "io_uring") }) {
		t.Errorf("the task holds its seed's io_uring fd: %v", task.Fds)
	}
	if !slices.Equal(task.VmPin, []string{"0"}) {
		t.Errorf("the task's VmPin: %v kB, want 0", task.VmPin)
	}
}

// vmPinKiB reads a process's VmPin (0 if it is gone).
func vmPinKiB(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmPin:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return n
		}
	}
	return 0
}
