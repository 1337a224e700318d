package bridge

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/bootstrap"
	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
	"github.com/ansible-bridge/ansible-bridge/interp"
	"github.com/sirupsen/logrus"
)

// TestInterpreterLimit checks that a target keeps at most its maximum of
// interpreters, retiring the least recently used idle one, and refuses a
// new one (so the step goes through passthrough) when all are busy.
func TestInterpreterLimit(t *testing.T) {
	h := newHarness(t, 0)
	if r := h.run("ssh", h.sshArgs("127.0.0.1", "true"), ""); r.code != 0 {
		t.Fatalf("first call: %+v", r)
	}
	tg := h.srv.targets.all()[0]
	tg.agents.max = 2
	ctx := context.Background()
	start := func(python string) *interp.Client {
		t.Helper()
		c, err := tg.agent(ctx, nil, python, nil)
		if err != nil {
			t.Fatalf("agent %s: %v", python, err)
		}
		return c
	}
	a := start("python3")
	b := start("/usr/bin/python3")
	if again := start("python3"); again != a {
		t.Fatal("a running interpreter was not reused")
	}
	// b is now the least recently used: a third interpreter retires it.
	c := start("/usr/bin/env python3")
	select {
	case <-b.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("least recently used interpreter not retired")
	}
	select {
	case <-a.Done():
		t.Fatal("recently used interpreter retired")
	default:
	}

	// Both remaining interpreters busy: no room for another.
	release := make(chan struct{})
	defer close(release)
	for _, cl := range []*interp.Client{a, c} {
		pr, pw := io.Pipe()
		go func() {
			<-release
			pw.Close()
		}()
		go func() { _, _ = cl.Exec(ctx, interp.ExecRequest{Command: "cat", Stdin: pr}) }()
	}
	deadline := time.Now().Add(10 * time.Second)
	for a.Stats().InFlight == 0 || c.Stats().InFlight == 0 {
		if time.Now().After(deadline) {
			t.Fatal("requests never in flight")
		}
		time.Sleep(time.Millisecond) // polling a condition, not a delay
	}
	if _, err := tg.agent(ctx, nil, "/usr/bin/python3", nil); !errors.Is(err, errInterpreterLimit) {
		t.Fatalf("all busy: got %v, want errInterpreterLimit", err)
	}
}

// TestControlPersistExpiry: a target idle for its ControlPersist closes
// its connection (and interpreters), like an ssh master; the next step
// logs in again. Never while an invocation is in flight.
func TestControlPersistExpiry(t *testing.T) {
	h := newHarness(t, 0)
	args := h.sshArgs("127.0.0.1", "true") // ControlPersist=60s, as Ansible passes
	if r := h.run("ssh", args, ""); r.code != 0 {
		t.Fatalf("first call: %+v", r)
	}
	tg := h.srv.targets.all()[0]
	// The shim has its exit status before the daemon finishes the
	// invocation's bookkeeping.
	for deadline := time.Now().Add(5 * time.Second); tg.inflight.Load() != 0; {
		if time.Now().After(deadline) {
			t.Fatal("invocation never finished")
		}
		time.Sleep(time.Millisecond) // polling a condition, not a delay
	}
	now := time.Now()
	if tg.expireIdle(now) {
		t.Fatal("expired before ControlPersist passed")
	}
	iv := &invocation{}
	tg.attach(iv) // as serveSSH does before it dials
	if tg.expireIdle(now.Add(time.Hour)) {
		t.Fatal("expired with an invocation in flight")
	}
	tg.invocationDone(iv)
	if !tg.expireIdle(now.Add(time.Hour)) {
		t.Fatal("not expired after ControlPersist")
	}
	if r := h.run("ssh", args, ""); r.code != 0 {
		t.Fatalf("call after expiry: %+v", r)
	}
	tg.mu.Lock()
	dials := tg.dials
	tg.mu.Unlock()
	if dials != 2 {
		t.Fatalf("%d dials, want 2 (a fresh login after expiry)", dials)
	}
}

// TestExpiryFreesMemory: once ControlPersist has closed the daemon's last
// connection, its freed memory goes back to the system (RSS stayed at its
// peak after a 50-target run), and not while a connection is open.
func TestExpiryFreesMemory(t *testing.T) {
	h := newHarness(t, 0)
	freed := 0
	h.srv.freeMemory = func() { freed++ }
	// Two targets: the same place through another ControlPath is another one.
	for _, cp := range []string{h.cp, h.cp + "y"} {
		if r := h.run("ssh", h.sshArgsAt(cp, "127.0.0.1", "true"), ""); r.code != 0 {
			t.Fatalf("ControlPath=%s: %+v", cp, r)
		}
	}
	tgs := h.srv.targets.all()
	if len(tgs) != 2 {
		t.Fatalf("%d targets, want 2", len(tgs))
	}
	for _, tg := range tgs {
		for deadline := time.Now().Add(5 * time.Second); tg.inflight.Load() != 0; {
			if time.Now().After(deadline) {
				t.Fatal("invocation never finished")
			}
			time.Sleep(time.Millisecond) // polling a condition, not a delay
		}
	}
	later := time.Now().Add(time.Hour)
	if !tgs[0].expireIdle(later) {
		t.Fatal("first target did not expire")
	}
	h.srv.expireIdle(later) // the second closes now: none is left
	if freed != 1 {
		t.Fatalf("memory freed %d times, want once, after the last connection closed", freed)
	}
	h.srv.expireIdle(later.Add(time.Hour))
	if freed != 1 {
		t.Fatalf("memory freed %d times with nothing expiring, want 1", freed)
	}
	// A connection closed otherwise (reset_connection: -O stop) frees it
	// at the next tick too.
	if r := h.run("ssh", h.sshArgs("127.0.0.1", "true"), ""); r.code != 0 {
		t.Fatalf("ssh: %+v", r)
	}
	h.srv.expireIdle(time.Now())
	if r := h.run("ssh", h.sshArgs("-O", "stop", "127.0.0.1"), ""); r.code != 0 {
		t.Fatalf("ssh -O stop: %+v", r)
	}
	for deadline := time.Now().Add(5 * time.Second); h.srv.targets.connected(); {
		if time.Now().After(deadline) {
			t.Fatal("connection still open after -O stop")
		}
		time.Sleep(time.Millisecond) // polling a condition, not a delay
	}
	h.srv.expireIdle(time.Now())
	if freed != 2 {
		t.Fatalf("memory freed %d times, want 2: once more after -O stop closed the last connection", freed)
	}
	if got := h.srv.Status().Memory.Returned; got != uint64(freed) {
		t.Fatalf("status says memory returned %d times, want %d", got, freed)
	}
}

// fakeAgents boots in-process fake interpreters that say hello and exit
// when their stdin ends, counting how many are alive at once.
type fakeAgents struct {
	live, peak, boots atomic.Int32
	// gate, if set, holds each boot until it is closed; entered gets the
	// python of each boot that reached it.
	gate    chan struct{}
	entered chan string
}

func (f *fakeAgents) start(ctx context.Context, python string, _ bootstrap.Runner) (*interp.Client, error) {
	n := f.live.Add(1)
	for p := f.peak.Load(); n > p && !f.peak.CompareAndSwap(p, n); p = f.peak.Load() {
	}
	f.boots.Add(1)
	if f.entered != nil {
		f.entered <- python
	}
	if f.gate != nil {
		<-f.gate
	}
	if strings.HasPrefix(python, "missing") {
		f.live.Add(-1)
		return nil, fmt.Errorf("%w: %s: not found", bootstrap.ErrFailed, python)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
		js, _ := json.Marshal(interp.AgentInfo{Protocol: interp.Protocol, PID: int(f.boots.Load()), User: "test"})
		resp := binary.BigEndian.AppendUint32(nil, uint32(len(js)))
		resp = append(resp, js...)
		hello := binary.BigEndian.AppendUint32([]byte(interp.Magic), uint32(5+len(resp)))
		hello = append(hello, 3) // a response frame, id 0
		hello = binary.BigEndian.AppendUint32(hello, 0)
		if _, err := outW.Write(append(hello, resp...)); err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, inR) // requests, until stdin ends
		f.live.Add(-1)
		outW.Close()
	}()
	return interp.NewClient(ctx, interp.Conn{Stdin: inW, Stdout: outR}, logrus.New())
}

func fakeTarget(t *testing.T, max int, f *fakeAgents) *target {
	log := logrus.New()
	log.SetOutput(testWriter{t})
	log.SetLevel(logrus.WarnLevel)
	tg := &target{label: "test@fake:22", log: log}
	tg.agents.max = max
	tg.agents.start = f.start
	t.Cleanup(tg.retireAgents)
	return tg
}

// TestAgentStartsRespectLimit: concurrent first starts of more pythons
// than the limit boot no more than the limit, the others are refused at
// once (passthrough), and status and anyAgent answer while they boot.
func TestAgentStartsRespectLimit(t *testing.T) {
	const limit, starts = 3, 8
	f := &fakeAgents{gate: make(chan struct{}), entered: make(chan string, starts)}
	tg := fakeTarget(t, limit, f)
	var once sync.Once
	release := func() { once.Do(func() { close(f.gate) }) }
	defer release()
	refused := make(chan error, starts)
	results := make(chan error, starts)
	for i := range starts {
		go func() {
			_, err := tg.agent(context.Background(), nil, fmt.Sprintf("python%d", i), nil)
			if errors.Is(err, errInterpreterLimit) {
				refused <- err
			}
			results <- err
		}()
	}
	booting := 0
	for n := 0; n < starts; n++ {
		select {
		case <-f.entered:
			booting++
		case <-refused:
		}
	}
	if booting > limit {
		t.Fatalf("%d interpreters booting at once, limit %d", booting, limit)
	}
	// Boots are held: status must not wait for them.
	if st := tg.interpreterStatus(); len(st) != 0 {
		t.Errorf("status lists %d interpreters before any started", len(st))
	}
	if tg.anyAgent() != nil {
		t.Error("anyAgent returned an interpreter still booting")
	}
	release()
	ok := 0
	for range starts {
		if err := <-results; err == nil {
			ok++
		}
	}
	if ok != booting || len(tg.interpreterStatus()) != booting {
		t.Fatalf("%d started, %d in status; want %d", ok, len(tg.interpreterStatus()), booting)
	}
}

// TestAgentsStress runs many concurrent starts, retirements, become
// reservations and status reads (go test -race): the limit is never
// exceeded, nothing deadlocks (a deadlock is the test timing out), and
// retiring them all leaves no interpreter alive.
func TestAgentsStress(t *testing.T) {
	const limit = 4
	f := &fakeAgents{}
	tg := fakeTarget(t, limit, f)
	pythons := []string{"python3", "python3.11", "/usr/bin/python3", "/usr/bin/env python3", "python3.12", "python3.13", "missing-python"}
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for range 200 {
				py := pythons[r.IntN(len(pythons))]
				switch op := r.IntN(10); {
				case op < 5:
					c, err := tg.agent(context.Background(), nil, py, nil)
					if err == nil {
						_ = c.Info()
					} else if !errors.Is(err, errInterpreterLimit) && !errors.Is(err, bootstrap.ErrFailed) && !errors.Is(err, interp.ErrAgentGone) {
						t.Errorf("agent %s: %v", py, err)
					}
				case op < 7:
					_ = tg.interpreterStatus()
					_ = tg.anyAgent()
				case op < 8:
					tg.retireAgent(py)
				case op < 9:
					becomeStart(t, tg, slotKey{become: "sudo root", python: py}, f)
				default:
					if r.IntN(20) == 0 {
						tg.retireAgents()
					}
				}
			}
		}()
	}
	wg.Wait()
	if p := f.peak.Load(); p > limit {
		t.Fatalf("%d interpreters alive at once, limit %d", p, limit)
	}
	tg.retireAgents()
	if n := f.live.Load(); n != 0 {
		t.Fatalf("%d interpreters alive after retiring all", n)
	}
	t.Logf("%d boots, peak %d alive", f.boots.Load(), f.peak.Load())
}

// becomeStart plays serveBecome's part for key: use the running
// interpreter, or start one (as startBecomeAgent would) and record it.
func becomeStart(t *testing.T, tg *target, key slotKey, f *fakeAgents) {
	if c, _, _ := tg.runningAgent(context.Background(), key); c != nil {
		return
	}
	res, err := tg.reserveAgent(key)
	if err != nil {
		if !errors.Is(err, errInterpreterLimit) {
			t.Errorf("reserve %q: %v", key, err)
		}
		return
	}
	c, err := f.start(context.Background(), key.String(), nil)
	if !res.done(tg, c, []byte("pw"), err) && c != nil {
		tg.dropAgent(c)
	}
}

// TestSessionWaitEndsStuckCommand: an interpreter session whose command
// does not exit is closed when its wait gives up, and its connection is
// released (so that reset_connection or ControlPersist can close it).
func TestSessionWaitEndsStuckCommand(t *testing.T) {
	h := newHarness(t, 0)
	port, _ := strconv.Atoi(h.port)
	tg := h.srv.targets.get(&sshclient.Settings{User: "test", HostName: "127.0.0.1", Port: port}, &invocation{})
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Opening the fifo for writing lets the command end, after the test.
	t.Cleanup(func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
	})
	r := &sessionRunner{t: tg}
	conn, err := r.Start(context.Background(), "cat "+fifo+" >/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	wait := conn.Wait
	conn.Stdin.Close() // as Client.Close does: this command does not care
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with an ended ctx: %v, want context.Canceled", err)
	}
	// This wait returns once the session is over and released.
	_ = wait(context.Background())
	tg.mu.Lock()
	defer tg.mu.Unlock()
	for _, c := range tg.conns {
		c.mu.Lock()
		active := c.active
		c.mu.Unlock()
		if active != 0 {
			t.Errorf("connection still has %d sessions in use", active)
		}
	}
	if len(tg.conns) != 1 {
		t.Errorf("%d connections, want the one that was used", len(tg.conns))
	}
}

// retireAgents closes every interpreter of t at once, as -O exit does.
func (t *target) retireAgents() { t.closeAgents(t.takeAgents()) }
