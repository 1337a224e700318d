package bridge

import (
	"bytes"
	"errors"
	"io"
	"strings"

	"github.com/ansible-bridge/ansible-bridge/bridge/become"
	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/interp"
	"github.com/ansible-bridge/ansible-bridge/interp/ansiballz"
)

// routeBecome is a module run in a become user's interpreter: a sudo,
// su or doas wrapper (package become) whose inner command is an
// AnsiballZ module run.
const routeBecome = "become"

var becomeRoute = route{
	name:  routeBecome,
	match: func(r *request) bool { return r.fast && r.becomeStep },
	serve: func(r *request) (int, bool) { return r.serveBecome() },
}

// serveBecome runs a become wrapper whose inner command is an AnsiballZ
// module in an interpreter running as the become user. The first such
// step starts that interpreter through the very wrapper Ansible sent (its
// tool, options, prompt and success marker), with the module swapped for
// the interpreter's first stage, and relays the password exchange; later
// steps run with no become tool at all. served is false when the step
// is not for this route (the caller passes it through).
func (r *request) serveBecome() (code int, served bool) {
	ctx, iv, t := r.ctx, r.iv, r.t
	w, err := become.Parse(r.command)
	if err != nil {
		if errors.Is(err, become.ErrUnsupported) {
			// The tool itself decides what such a command line does.
			t.countSlow(iv, "become command line the bridge does not model ("+err.Error()+"): the tool runs, as with stock")
		}
		return 0, false
	}
	c := classifyInner(w.Inner)
	if c.kind != cmdRunPython {
		return 0, false
	}
	if startupEnv(c.env) != "" {
		t.countSlow(iv, slowStartupEnv)
		return 0, false
	}
	if refused, err := r.terminalRefused(); err != nil {
		return connFailure(iv, err), true
	} else if refused {
		return 0, false
	}
	var wrapper *ansiballz.Wrapper
	if c.script != "" {
		if wrapper = t.heldWrapper(c.script); wrapper == nil {
			return 0, false
		}
		if why := secretEnv(c, wrapper); why != "" {
			wrapper.Forget()
			t.countSlow(iv, why)
			return 0, false
		}
	}
	python := strings.Join(c.python, " ")
	tty := r.tty()
	key := slotKey{become: w.Identity(), python: python, terminal: becomeOnTerminal(w, tty)}
	ag, secret, seen := t.runningAgent(ctx, key)
	if ag != nil && !t.keepBecomeAgent(ctx, iv, key, ag, seen) {
		ag, secret = nil, nil // the tool runs again, as for stock's every step
	}
	var stdin io.Reader
	if ag != nil {
		if err := iv.accept(""); err != nil {
			return fakessh.ExitSSHError, true
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
				stdin = io.MultiReader(&wipingReader{b: answer}, iv.stdin)
				defer clear(answer) // a step that ended before the tool read it
			} else {
				clear(answer)
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
		if c.script != "" && becomeUser(w) == "root" && t.hasLive() {
			// Its temp dirs are written as the login user, whose
			// interpreter says who that is (loginOwner): started beside
			// the become one, its round trips overlap those.
			loginUp := make(chan struct{})
			go func() {
				defer close(loginUp)
				_, _ = t.agent(ctx, iv, python, r.sendEnv())
			}()
			defer func() { <-loginUp }()
		}
		// Counted before the tool runs: Ansible kills its ssh at a
		// password prompt it has no password for.
		t.countRoute(iv, routeBecome)
		st, err := r.startBecomeAgent(w, python, key.terminal, stdin)
		recorded := res.done(t, st.ag, st.password, err)
		if st.ag == nil {
			if err != nil {
				iv.log.WithError(err).Info("become interpreter not started")
			}
			return st.code, true
		}
		ag, stdin = st.ag, st.stdin
		if !recorded {
			// Another one runs under key: this one was for this step.
			defer t.dropAgent(ag)
		}
	}
	t.countRoute(iv, routeBecome)
	if wrapper == nil {
		iv.entry.AwaitModule() // readPiped takes it apart
		var data []byte
		if data, wrapper = t.readPiped(iv, stdin); wrapper == nil {
			// Not a module after all: the inner command runs as the become
			// user all the same, in its interpreter.
			return r.execIn(ag, w, io.MultiReader(bytes.NewReader(data), stdin), tty), true
		}
		defer wrapper.Wipe()
	} else {
		defer wrapper.Forget()
		iv.entry.SetModule(wrapper)
		if st, _ := t.house.lookup(c.script); st != nil {
			st.setRanAs(becomeUser(w))
		}
	}
	// An unprivileged become user cannot write the login user's temp
	// dirs; Ansible gave the module none (_ansible_tmpdir is unset for
	// it) and the wrapper runs from memory.
	req, held := r.moduleRequest(c, wrapper, w.Shell, ag.Info().UID == 0)
	req.Env = withCommandEnv(req.Env, w)
	if len(req.Dirs) > 0 {
		if owner, err := r.loginOwner(python); err == nil {
			req.Owner = owner
		} else {
			iv.log.WithError(err).Warn("login user unknown; temp dirs written as the become user")
		}
	}
	// A change of /etc/environment does not concern the become user: the
	// tool sets its environment (stock steps do not see it either).
	req.IgnoreEnvChange = true
	if ch := changedUsers(wrapper); ch.any() {
		t.retireUsers(ctx, iv, ag, ch)
	}
	req.WatchPolicy = true
	if req.PTY != nil {
		req.PTY.NotControlling = w.Method.OwnSession
	}
	tctx, stop := r.taskContext(req.PTY != nil, w.Method.OwnSession)
	defer stop()
	before := t.touched()
	res, err := ag.RunModule(tctx, req)
	t.afterBecomeStep(iv, key, ag, before, res)
	return r.moduleResult(req, held, res, err), true
}

// withCommandEnv adds what w's tool says about the command it runs
// (Wrapper.CommandEnv) to env, under what the step sets itself.
func withCommandEnv(env map[string]string, w *become.Wrapper) map[string]string {
	for k, v := range w.CommandEnv() {
		if _, set := env[k]; set {
			continue
		}
		if env == nil {
			env = map[string]string{}
		}
		env[k] = v
	}
	return env
}

// becomeUser is the user a wrapper becomes, as the debug view names it.
func becomeUser(w *become.Wrapper) string {
	if w.User != "" {
		return w.User
	}
	return "root"
}

// execIn runs w's inner command as a shell command in ag, with stdin, as
// the generic route for a become step that is not an AnsiballZ module.
func (r *request) execIn(ag *interp.Client, w *become.Wrapper, stdin io.Reader, tty bool) int {
	iv := r.iv
	req := interp.ExecRequest{Command: w.Inner, Stdin: stdin, Stdout: iv.stdout(), Stderr: iv.stderr(), Env: withCommandEnv(nil, w)}
	if tty {
		req.PTY = &interp.PTY{Term: iv.getenv("TERM"), Rows: iv.hello.Rows, Cols: iv.hello.Cols, NotControlling: w.Method.OwnSession}
	}
	ctx, stop := r.taskContext(tty, w.Method.OwnSession)
	defer stop()
	r.t.touched() // the next step asks whether it changed the tool's policy
	code, err := ag.Exec(ctx, req)
	if err != nil {
		if errors.Is(err, interp.ErrAgentGone) {
			iv.log.WithError(err).Warn("command in the interpreter failed")
			r.lostConnection(tty)
			return fakessh.ExitSSHError
		}
		iv.errorf("ansible-bridge: persistent interpreter failed: %v", err)
		return fakessh.ExitSSHError
	}
	if tty {
		r.sharedClosed()
	}
	return code
}

// loginOwner returns the login user's uid and gid, from its interpreter.
func (r *request) loginOwner(python string) (*[2]int, error) {
	ag, err := r.t.agent(r.ctx, r.iv, python, r.sendEnv())
	if err != nil {
		return nil, err
	}
	info := ag.Info()
	return &[2]int{info.UID, info.GID}, nil
}

// wipingReader reads b, overwriting the bytes it has read: a typed
// password goes on to the tool, and no copy of it stays here.
type wipingReader struct{ b []byte }

func (r *wipingReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	clear(r.b[:n])
	r.b = r.b[n:]
	return n, nil
}

// askPassword shows Ansible the tool's password prompt and reads its
// answer (a secret from then on). ok reports whether it is the password
// the interpreter was started with; if not, answer is the line typed, to
// be given to the real tool.
func askPassword(iv *invocation, w *become.Wrapper, tty bool, secret *passwordHash) (answer []byte, ok bool) {
	prompt := w.PasswordPrompt()
	onTerminal := becomeOnTerminal(w, tty)
	if onTerminal {
		_, _ = io.WriteString(iv.stdout(), prompt)
	} else {
		_, _ = io.WriteString(iv.stderr(), prompt) // sudo -S prompts on stderr
	}
	// Room for any password: growing would leave copies behind.
	line := make([]byte, 0, 4096)
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
	clear(b)
	pw := bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
	if len(pw) > 0 && iv.secrets != nil {
		iv.secrets.AddSecret(pw)
	}
	if onTerminal {
		_, _ = io.WriteString(iv.stdout(), "\r\n") // the tool ends the silent line
	}
	return line, secret.matches(pw)
}
