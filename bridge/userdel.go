package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/ansible-bridge/ansible-bridge/interp"
	"github.com/ansible-bridge/ansible-bridge/interp/ansiballz"
	shellquote "github.com/kballard/go-shellquote"
)

// deletedUser returns the user a module run deletes, or "": the user
// module with state=absent, or command/shell running userdel or deluser.
// A become interpreter living as that user would make userdel fail ("user
// … is currently used by process"), where stock leaves no process behind.
// raw and script are not looked at (they never reach an interpreter).
func deletedUser(w *ansiballz.Wrapper) string {
	module := w.ModuleFQN[strings.LastIndexByte(w.ModuleFQN, '.')+1:]
	if module != "user" && module != "command" && module != "shell" {
		return ""
	}
	// The words are looked for in the parameters' literal first: most
	// steps need no more.
	lit := w.ParamsLiteral()
	if !bytes.Contains(lit, []byte("absent")) && !bytes.Contains(lit, []byte("userdel")) && !bytes.Contains(lit, []byte("deluser")) {
		return ""
	}
	raw, err := w.Params()
	if err != nil {
		return ""
	}
	var p struct {
		Args map[string]any `json:"ANSIBLE_MODULE_ARGS"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return ""
	}
	str := func(k string) string { s, _ := p.Args[k].(string); return s }
	if module == "user" {
		if str("state") != "absent" {
			return ""
		}
		if name := str("name"); name != "" {
			return name
		}
		return str("user") // the alias
	}
	words, _ := shellquote.Split(str("_raw_params"))
	if argv, ok := p.Args["argv"].([]any); ok && len(words) == 0 {
		for _, a := range argv {
			s, _ := a.(string)
			words = append(words, s)
		}
	}
	return userdelTarget(words)
}

// userdelTarget finds `userdel [options] NAME` or `deluser [options]
// NAME` in a command's words: NAME is the last word of that command.
func userdelTarget(words []string) string {
	for i, w := range words {
		if b := path.Base(w); b != "userdel" && b != "deluser" {
			continue
		}
		name := ""
		for _, a := range words[i+1:] {
			if a == ";" || a == "&&" || a == "||" || a == "|" {
				break
			}
			if !strings.HasPrefix(a, "-") {
				name = a
			}
		}
		return name
	}
	return ""
}

// retireUser closes the target's idle become interpreters that run as
// user before ag runs a step deleting that user, and has ag wait (a
// couple of seconds at most) until no process of that uid is left, as
// after stock's steps. A busy one is left alone: a running task of that
// user makes userdel fail with stock too.
func (t *target) retireUser(ctx context.Context, iv *invocation, ag *interp.Client, user string) {
	var victims []*agentSlot
	t.agents.mu.Lock()
	for key, s := range t.agents.slots {
		if key.become == "" || !s.alive() {
			continue
		}
		if c := s.client; c != ag && c.Info().User == user && c.Stats().InFlight == 0 {
			delete(t.agents.slots, key)
			victims = append(victims, takeLocked(s)...)
		}
	}
	t.agents.mu.Unlock()
	if len(victims) == 0 {
		return
	}
	start := time.Now()
	uid := victims[0].client.Info().UID
	t.retire(victims)
	closed := time.Now()
	// The interpreter's zygotes and spare forks exit when it does, but
	// not at once.
	code, err := ag.Exec(ctx, interp.ExecRequest{Command: waitNoProcessOf(uid)})
	// Where the target's init reaps orphans late, their zombies count
	// for userdel too: this waits for them as well (about 1.3 s in a
	// container whose pid 1 reaps slowly; nothing with systemd).
	log := iv.log.WithField("user", user).WithField("interpreters", len(victims)).WithField("ms", time.Since(start).Milliseconds()).WithField("close_ms", closed.Sub(start).Milliseconds())
	if err != nil || code != 0 {
		log.WithError(err).WithField("exit", code).WithField("uid", uid).Warn("step deletes a user: its interpreters retired, but processes of the user still run")
		return
	}
	log.Info("step deletes a user: its interpreters retired first")
}

// waitNoProcessOf is a shell command that waits up to about 2 s until
// no process runs as uid (the owner of /proc/PID), and fails otherwise.
func waitNoProcessOf(uid int) string {
	return `i=0; while [ -n "$(find /proc -mindepth 1 -maxdepth 1 -name '[0-9]*' -user ` + strconv.Itoa(uid) +
		` 2>/dev/null)" ]; do [ $i -ge 100 ] && exit 1; sleep 0.02; i=$((i+1)); done`
}
