package bridge

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/ansible-bridge/ansible-bridge/bootstrap"
	"github.com/ansible-bridge/ansible-bridge/bridge/become"
	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/interp"
	"golang.org/x/crypto/ssh"
)

// routeBecome is a module run in a become user's interpreter.
const routeBecome = "become"

// becomeKeyPrefix marks become interpreters among a target's agent slots.
const becomeKeyPrefix = "become\x00"

// serveBecome runs a become wrapper whose inner command is an AnsiballZ
// module in an interpreter running as the become user. The first such
// step starts that interpreter through the very wrapper Ansible sent (its
// tool, options, prompt and success marker), with the module swapped for
// the interpreter's first stage, and relays the password exchange; later
// steps run with no become tool at all. done is false when the step is
// not for this route (the caller passes it through).
func (s *Server) serveBecome(ctx context.Context, iv *invocation, t *target, inv *fakessh.SSHInvocation, settings *sshclient.Settings, command string) (code int, done bool) {
	w, err := become.Parse(command)
	if err != nil {
		return 0, false
	}
	c := classifyInner(w.Inner)
	if c.kind != cmdRunPython {
		return 0, false
	}
	var wrapper []byte
	if c.script != "" {
		if wrapper = t.heldWrapper(c.script); wrapper == nil {
			return 0, false
		}
	}
	python := strings.Join(c.python, " ")
	key := becomeKeyPrefix + w.Identity() + "\x00" + python
	tty := wantTTY(inv, iv.hello.StdinTTY)
	ag, secret := t.runningAgent(ctx, key)
	var stdin io.Reader
	if ag != nil {
		if err := iv.accept(""); err != nil {
			return 255, true
		}
		stdin = iv.stdin
		switch {
		case secret != nil && w.Password == become.PasswordNever:
			// A password was needed, and this step has none (sudo -n):
			// the tool says so.
			ag = nil
		case secret != nil:
			// The interpreter was started with a password: this step's
			// password must be the same, as the tool would check it.
			answer, ok := askPassword(iv, w, tty, secret)
			if !ok {
				ag = nil // the tool decides, with what Ansible typed
				stdin = io.MultiReader(strings.NewReader(answer), iv.stdin)
			}
		}
		if ag != nil {
			// What the tool would have printed as the become user.
			eol := "\n"
			if tty {
				eol = "\r\n"
			}
			_, _ = io.WriteString(iv.stdout(), w.Success+eol)
		}
	}
	if ag == nil {
		res, err := t.reserveAgent(key)
		if err != nil {
			return 0, false
		}
		var code int
		var password string
		ag, stdin, password, code, err = s.startBecomeAgent(ctx, iv, t, inv, settings, w, command, python, tty, stdin)
		recorded := res.done(t, ag, password, err)
		if ag == nil {
			if err != nil {
				iv.log.WithError(err).Info("become interpreter not started")
			}
			return code, true
		}
		if !recorded {
			// Another one runs under key: this one was for this step.
			defer t.dropAgent(ag)
		}
	}
	t.countRoute(iv, routeBecome)
	if wrapper == nil {
		data, err := io.ReadAll(io.LimitReader(stdin, maxPipedModule))
		if err != nil || !t.recognised(iv, data) {
			// Not a module after all: the inner command runs as the become
			// user all the same, in its interpreter.
			return s.execIn(ctx, iv, ag, w.Inner, io.MultiReader(bytes.NewReader(data), stdin), tty, settings), true
		}
		wrapper = data
	} else {
		iv.entry.SetModuleSource(wrapper)
		if st, _ := t.house.lookup(c.script); st != nil {
			st.setRanAs(becomeUser(w))
		}
	}
	req, held := moduleRequest(iv, inv, t, c, wrapper)
	if len(req.Dirs) > 0 {
		if ag.Info().UID != 0 {
			// An unprivileged become user cannot write the login user's
			// temp dirs; Ansible gave the module none (_ansible_tmpdir is
			// unset for it) and the wrapper runs from memory.
			req.Dirs, req.Files, held = nil, nil, nil
		} else if owner, err := t.loginOwner(ctx, iv, python, settings); err == nil {
			req.Owner = owner
		} else {
			iv.log.WithError(err).Warn("login user unknown; temp dirs written as the become user")
		}
	}
	// A change of /etc/environment does not concern the become user: the
	// tool sets its environment (stock steps do not see it either).
	req.IgnoreEnvChange = true
	if u := deletedUser(wrapper); u != "" {
		t.retireUser(ctx, iv, ag, u)
	}
	res, err := ag.RunModule(ctx, req)
	return s.moduleResult(iv, settings, req, held, res, err), true
}

// becomeUser is the user a wrapper becomes, as the debug view names it.
func becomeUser(w *become.Wrapper) string {
	if w.User != "" {
		return w.User
	}
	return "root"
}

// execIn runs command as a shell command in ag, with stdin, as the
// generic route for a become step that is not an AnsiballZ module.
func (s *Server) execIn(ctx context.Context, iv *invocation, ag *interp.Client, command string, stdin io.Reader, tty bool, settings *sshclient.Settings) int {
	req := interp.ExecRequest{Command: command, Stdin: stdin, Stdout: iv.stdout(), Stderr: iv.stderr()}
	if tty {
		req.PTY = &interp.PTY{Term: iv.getenv("TERM"), Rows: iv.hello.Rows, Cols: iv.hello.Cols}
	}
	code, err := ag.Exec(ctx, req)
	if err != nil {
		iv.errorf("ansible-bridge: persistent interpreter failed: %v", err)
		return 255
	}
	if tty && !iv.quiet {
		iv.errorf("Shared connection to %s closed.", settings.HostName)
	}
	return code
}

// loginOwner returns the login user's uid and gid, from its interpreter.
func (t *target) loginOwner(ctx context.Context, iv *invocation, python string, settings *sshclient.Settings) (*[2]int, error) {
	ag, err := t.agent(ctx, iv, python, sendEnv(settings.SendEnv, iv.hello.Env))
	if err != nil {
		return nil, err
	}
	info := ag.Info()
	return &[2]int{info.UID, info.GID}, nil
}

// startBecomeAgent runs Ansible's become wrapper with the interpreter's
// first stage inside, relaying everything up to the success marker
// between the tool and Ansible: its password prompt, the password Ansible
// answers (remembered as a secret, never logged), "Sorry, try again.".
// When the tool fails, its output and exit status are Ansible's answer
// and no interpreter is kept. On success it returns the interpreter and
// the shim's stdin from there on.
//
// shimIn, if set, is the shim's stdin as accepted already (with a
// password typed ahead). The returned password is the last line Ansible
// typed to the tool ("" if none).
func (s *Server) startBecomeAgent(ctx context.Context, iv *invocation, t *target, inv *fakessh.SSHInvocation, settings *sshclient.Settings, w *become.Wrapper, command, python string, tty bool, shimIn io.Reader) (*interp.Client, io.Reader, string, int, error) {
	startCmd, err := w.WithInner(command, bootstrap.Inline(python))
	if err != nil {
		return nil, nil, "", 0, err
	}
	c, sess, err := t.newSession(ctx, iv, sendEnv(settings.SendEnv, iv.hello.Env))
	if err != nil {
		return nil, nil, "", connFailure(iv, err), err
	}
	release := sync.OnceFunc(c.release) // by whoever ends the session
	fail := func(code int, err error) (*interp.Client, io.Reader, string, int, error) {
		sess.Close()
		release()
		return nil, nil, "", code, err
	}
	// su reads passwords from a terminal only; -tt asks for one anyway.
	pty := tty || w.Method == become.Su
	if pty {
		if err := sess.RequestPty(iv.getenv("TERM"), iv.hello.Rows, iv.hello.Cols, ssh.TerminalModes{}); err != nil {
			return fail(255, err)
		}
	}
	sessIn, err := sess.StdinPipe()
	if err != nil {
		return fail(255, err)
	}
	sessOut, err := sess.StdoutPipe()
	if err != nil {
		return fail(255, err)
	}
	sessErr, err := sess.StderrPipe()
	if err != nil {
		return fail(255, err)
	}
	if err := sess.Start(startCmd); err != nil {
		iv.errorf("exec request failed on channel 0")
		return fail(255, err)
	}
	if shimIn == nil {
		if err := iv.accept(""); err != nil {
			return fail(255, err)
		}
		shimIn = iv.stdin
	}
	// A shim that goes away (Ansible gave up on a wrong password) ends
	// the attempt; once the interpreter runs, its session outlives this
	// invocation.
	stopCancel := context.AfterFunc(ctx, func() { sess.Close() })
	// If Ansible gives up before the marker, the tool must not wait on:
	// its stdin ends, and the session closes, which hangs up a terminal
	// (sudo on -tt waits on its prompt until then), as the end of stock's
	// ssh does.
	gate := newStdinGate(shimIn, sessIn, iv.secrets, func() {
		_ = sessIn.Close()
		_ = sess.Close()
	})
	// stderr: the tool's prompt (sudo -S) and complaints go to the shim
	// as they come; after the success marker, the interpreter's log.
	errOut := &switchWriter{w: iv.stderr()}
	agentErr, agentErrW := io.Pipe()
	errDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(errOut, sessErr)
		agentErrW.Close()
		close(errDone)
	}()
	// The gate closes before Ansible can see the marker: a pipelined
	// module, sent once it has, must not reach the interpreter's first
	// stage, which is still reading the interpreter from the same stdin.
	rest, ok := relayUntil(sessOut, iv.stdout(), []byte(w.Success), func() { gate.stop() })
	stopCancel()
	if !ok {
		// The tool failed (wrong password, -n and a password needed, no
		// such user): its words and status are the answer.
		gate.stop()
		werr := sess.Wait()
		<-errDone
		release()
		code := exitStatus(werr)
		if pty && !iv.quiet {
			iv.errorf("Shared connection to %s closed.", settings.HostName)
		}
		return nil, nil, "", code, nil
	}
	shimIn = gate.stop()
	out := io.MultiReader(bytes.NewReader(rest), sessOut)
	if pty {
		// The first stage makes the terminal raw, then says so.
		br := bufio.NewReader(out)
		if err := skipThrough(br, []byte(bootstrap.RawMarker+"\n")); err != nil {
			iv.errorf("ansible-bridge: become interpreter did not start: %v", err)
			return fail(255, err)
		}
		out = br
	}
	errOut.set(agentErrW)
	ag, err := bootstrap.Attach(context.WithoutCancel(ctx), interp.Conn{
		Stdin: sessIn, Stdout: out, Stderr: agentErr,
		Wait: sessionWait(sess, release),
	}, t.log.WithField("become", w.Identity()))
	if err != nil {
		iv.errorf("ansible-bridge: become interpreter did not start: %v", err)
		return fail(255, err)
	}
	t.log.WithField("become", w.Identity()).WithField("pid", ag.Info().PID).Info("become interpreter started")
	return ag, shimIn, gate.lastLine(), 0, nil
}

// askPassword shows Ansible the tool's password prompt and reads its
// answer (a secret from then on). ok reports whether it is the password
// the interpreter was started with; if not, answer is the line typed, to
// be given to the real tool.
func askPassword(iv *invocation, w *become.Wrapper, tty bool, secret *passwordHash) (answer string, ok bool) {
	prompt := w.Prompt
	switch {
	case w.Method == become.Su, prompt == "":
		prompt = "Password: "
	}
	if tty || w.Method == become.Su {
		_, _ = io.WriteString(iv.stdout(), prompt)
	} else {
		_, _ = io.WriteString(iv.stderr(), prompt) // sudo -S prompts on stderr
	}
	var line []byte
	b := make([]byte, 1)
	for {
		n, err := iv.stdin.Read(b)
		if n == 1 {
			line = append(line, b[0])
			if b[0] == '\n' {
				break
			}
		}
		if err != nil {
			break
		}
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(string(line), "\n"), "\r")
	if pw != "" && iv.secrets != nil {
		iv.secrets.AddSecret(pw)
	}
	if tty || w.Method == become.Su {
		_, _ = io.WriteString(iv.stdout(), "\r\n") // the tool ends the silent line
	}
	return string(line), secret.matches(pw)
}

// relayUntil copies r to w until a line holding marker has been copied,
// calling atMarker just before that line goes out. It returns what it read
// past that line, and false if r ended first. Bytes are passed on as they
// come (a prompt has no newline), except a tail that might be the start of
// marker.
func relayUntil(r io.Reader, w io.Writer, marker []byte, atMarker func()) ([]byte, bool) {
	var buf []byte
	chunk := make([]byte, 4096)
	for {
		n, err := r.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if i := bytes.Index(buf, marker); i >= 0 {
			if j := bytes.IndexByte(buf[i:], '\n'); j >= 0 {
				end := i + j + 1
				atMarker()
				_, _ = w.Write(buf[:end])
				return buf[end:], true
			}
		} else if keep := partialSuffix(buf, marker); len(buf) > keep {
			_, _ = w.Write(buf[:len(buf)-keep])
			buf = buf[len(buf)-keep:]
		}
		if err != nil {
			_, _ = w.Write(buf)
			return nil, false
		}
	}
}

// partialSuffix is the length of the longest suffix of b that is a
// proper prefix of marker.
func partialSuffix(b, marker []byte) int {
	for n := min(len(b), len(marker)-1); n > 0; n-- {
		if bytes.HasSuffix(b, marker[:n]) {
			return n
		}
	}
	return 0
}

// skipThrough reads r up to and including marker.
func skipThrough(r *bufio.Reader, marker []byte) error {
	var seen []byte
	for !bytes.HasSuffix(seen, marker) {
		b, err := r.ReadByte()
		if err != nil {
			return fmt.Errorf("before %q: %w (got %q)", marker, err, seen)
		}
		seen = append(seen, b)
		if len(seen) > 64<<10 {
			return fmt.Errorf("no %q in 64 KiB of output", marker)
		}
	}
	return nil
}

// switchWriter writes to w, which set may change.
type switchWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *switchWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.w.Write(p)
	return len(p), nil
}

func (s *switchWriter) set(w io.Writer) {
	s.mu.Lock()
	s.w = w
	s.mu.Unlock()
}

// stdinGate passes the shim's stdin to the become tool (the password
// Ansible types at its prompt) until stop; from then on what the shim
// sends is kept for the caller (a pipelined module). Lines passed to the
// tool are registered as secrets.
type stdinGate struct {
	mu      sync.Mutex
	stopped bool
	last    string
	pr      *io.PipeReader
	pw      *io.PipeWriter
}

// gaveUp, if set, runs when the shim's stdin ends before stop.
func newStdinGate(shim io.Reader, tool io.Writer, secrets interface{ AddSecret(string) }, gaveUp func()) *stdinGate {
	pr, pw := io.Pipe()
	g := &stdinGate{pr: pr, pw: pw}
	go func() {
		var line []byte
		buf := make([]byte, 32<<10)
		for {
			n, err := shim.Read(buf)
			g.mu.Lock()
			stopped := g.stopped
			if !stopped && n > 0 {
				line = append(line, buf[:n]...)
				for {
					i := bytes.IndexByte(line, '\n')
					if i < 0 {
						break
					}
					g.last = strings.TrimSuffix(string(line[:i]), "\r")
					if secrets != nil && g.last != "" {
						secrets.AddSecret(g.last)
					}
					line = line[i+1:]
				}
				_, _ = tool.Write(buf[:n])
			}
			g.mu.Unlock()
			if stopped && n > 0 {
				if _, werr := g.pw.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				// Ansible closes the ssh's stdin before the marker only
				// when it gives up (a wrong or missing password).
				g.mu.Lock()
				if !g.stopped && gaveUp != nil {
					gaveUp()
				}
				g.mu.Unlock()
				g.pw.CloseWithError(err)
				return
			}
		}
	}()
	return g
}

// lastLine is the last complete line passed to the tool.
func (g *stdinGate) lastLine() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.last
}

// stop ends the relay to the tool and returns the shim's stdin from there.
func (g *stdinGate) stop() io.Reader {
	g.mu.Lock()
	g.stopped = true
	g.mu.Unlock()
	return g.pr
}
