package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ansible-bridge/ansible-bridge/interp"
	"github.com/ansible-bridge/ansible-bridge/interp/ansiballz"
	shellquote "github.com/kballard/go-shellquote"
)

// userChange is what a module run changes among the target's users: the
// users named (their processes may not survive it: usermod -d, userdel),
// or every user's groups (a group's change).
type userChange struct {
	users     []string
	allGroups bool
}

func (c userChange) any() bool { return len(c.users) > 0 || c.allGroups }

// userCommands change a user named last on their command line; group
// commands change groups, and so whose members are.
var (
	userCommands  = map[string]bool{"userdel": true, "deluser": true, "usermod": true}
	groupCommands = map[string]bool{"groupmod": true, "groupdel": true, "delgroup": true, "addgroup": true, "adduser": true, "gpasswd": true}
)

// changedUsers returns what a module run changes among users: the user
// module (any state), the group module, command/shell running userdel,
// deluser, usermod or a group command. A become interpreter started
// before lives on as the user was then: userdel and usermod -d fail
// ("user … is currently used by process"), and a later step as that user
// would not see a group it was added to, where stock runs a fresh sudo
// for each step. raw and script are not looked at (they never reach an
// interpreter).
func changedUsers(w *ansiballz.Wrapper) userChange {
	module := w.ModuleFQN[strings.LastIndexByte(w.ModuleFQN, '.')+1:]
	switch module {
	case "group":
		return userChange{allGroups: true}
	case "user", "command", "shell":
	default:
		return userChange{}
	}
	// The words are looked for in the parameters' literal first: most
	// steps need no more.
	lit := w.ParamsLiteral()
	if module != "user" && !bytes.Contains(lit, []byte("user")) && !bytes.Contains(lit, []byte("group")) && !bytes.Contains(lit, []byte("gpasswd")) {
		return userChange{}
	}
	raw, err := w.Params()
	if err != nil {
		return userChange{}
	}
	var p struct {
		Args map[string]any `json:"ANSIBLE_MODULE_ARGS"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return userChange{}
	}
	str := func(k string) string { s, _ := p.Args[k].(string); return s }
	if module == "user" {
		name := str("name")
		if name == "" {
			name = str("user") // the alias
		}
		if name == "" {
			return userChange{}
		}
		return userChange{users: []string{name}}
	}
	words, _ := shellquote.Split(str("_raw_params"))
	if argv, ok := p.Args["argv"].([]any); ok && len(words) == 0 {
		for _, a := range argv {
			s, _ := a.(string)
			words = append(words, s)
		}
	}
	return commandUserChange(words)
}

// commandUserChange finds user and group commands in a command's words:
// `usermod [options] NAME` changes NAME, the last word of that command
// (up to ;, &&, || or |, also at a word's end).
func commandUserChange(words []string) userChange {
	var c userChange
	for i, w := range words {
		b := path.Base(strings.TrimRight(w, ";&|"))
		if groupCommands[b] {
			c.allGroups = true
		}
		if !userCommands[b] {
			continue
		}
		name := ""
		for _, a := range words[i+1:] {
			end := strings.TrimRight(a, ";&|")
			if end != "" && !strings.HasPrefix(end, "-") {
				name = end
			}
			if end != a || a == "" {
				break
			}
		}
		if name != "" {
			c.users = append(c.users, name)
		}
	}
	return c
}

// retireUsers closes the target's idle become interpreters that a step
// ag is about to run changes (ch: those running as a user it names, or
// all of them for a group's change) and has ag wait (a couple of seconds
// at most) until no process of a named user is left, as after stock's
// steps: the next step as such a user starts afresh through its become
// tool, as stock's does. A busy one is left alone: a running task of that
// user makes userdel fail with stock too.
func (t *target) retireUsers(ctx context.Context, iv *invocation, ag *interp.Client, ch userChange) {
	uids := map[int]string{}
	victims := map[*target][]*agentSlot{}
	// The machine's other aliases too (delegate_to an admin alias of the
	// same host): usermod refuses a user any process runs as.
	for _, tt := range append([]*target{t}, t.sameMachine()...) {
		tt.agents.mu.Lock()
		for key, s := range tt.agents.slots {
			if key.become == "" || !s.alive() {
				continue
			}
			c := s.client
			if c == ag || c.Stats().InFlight != 0 {
				continue
			}
			named := slices.Contains(ch.users, c.Info().User)
			if named || ch.allGroups {
				delete(tt.agents.slots, key)
				victims[tt] = append(victims[tt], takeLocked(s)...)
			}
			if named {
				uids[c.Info().UID] = c.Info().User
			}
		}
		tt.agents.mu.Unlock()
	}
	n := 0
	for _, v := range victims {
		n += len(v)
	}
	if n == 0 {
		return
	}
	start := time.Now()
	for tt, v := range victims {
		tt.retire(v)
	}
	closed := time.Now()
	log := iv.log.WithField("interpreters", n).WithField("close_ms", closed.Sub(start).Milliseconds())
	for uid, user := range uids {
		// The interpreter's zygotes and spare forks exit when it does, but
		// not at once. Where the target's init reaps orphans late, their
		// zombies count for userdel too: this waits for them as well
		// (about 1.3 s in a container whose pid 1 reaps slowly; nothing
		// with systemd).
		code, err := ag.Exec(ctx, interp.ExecRequest{Command: waitNoProcessOf(uid)})
		if err != nil || code != 0 {
			log.WithError(err).WithField("exit", code).WithField("user", user).WithField("uid", uid).Warn("step changes a user: its interpreters retired, but processes of the user still run")
		}
	}
	log.WithField("ms", time.Since(start).Milliseconds()).Info("step changes users or groups: their become interpreters retired first")
}

// waitNoProcessOf is a shell command that waits up to about 2 s until
// no process runs as uid (the owner of /proc/PID), and fails otherwise.
func waitNoProcessOf(uid int) string {
	return `i=0; while [ -n "$(find /proc -mindepth 1 -maxdepth 1 -name '[0-9]*' -user ` + strconv.Itoa(uid) +
		` 2>/dev/null)" ]; do [ $i -ge 100 ] && exit 1; sleep 0.02; i=$((i+1)); done`
}

// sameMachine returns the other targets whose live connections reach the
// host t's do (the same host key: another inventory alias, another
// login user).
func (t *target) sameMachine() []*target {
	keys := t.hostKeys()
	if len(keys) == 0 {
		return nil
	}
	var out []*target
	for _, o := range t.reg.all() {
		if o == t {
			continue
		}
		for _, k := range o.hostKeys() {
			if slices.Contains(keys, k) {
				out = append(out, o)
				break
			}
		}
	}
	return out
}

// hostKeys are the host keys of t's live connections, as wire bytes.
func (t *target) hostKeys() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var keys []string
	for _, c := range t.conns {
		if c.alive() && c.client.HostKey != nil {
			keys = append(keys, string(c.client.HostKey.Marshal()))
		}
	}
	return keys
}
