package sshclient

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sirupsen/logrus"
	"golang.org/x/crypto/ssh"
)

// UpdateHostKeys (OpenSSH 9.2 clientloop.c client_input_hostkeys and
// hostfile.c hostfile_replace_entries): after authentication sshd sends
// all its host keys in a hostkeys-00@openssh.com global request; the
// client proves the new ones with hostkeys-prove-00@openssh.com and
// rewrites the user known_hosts files so that they hold exactly the
// server's keys for the host.

const (
	hostKeysRequest = "hostkeys-00@openssh.com"
	hostKeysProve   = "hostkeys-prove-00@openssh.com"
)

// hostKeyUpdater handles the server's hostkeys-00@openssh.com once.
type hostKeyUpdater struct {
	name  string   // known_hosts name of the host
	files []string // user known_hosts files, as opened
	hash  bool
	algos []string // HostKeyAlgorithms the offered keys must fit
	log   logrus.FieldLogger

	once    sync.Once
	started atomic.Bool   // the server's keys arrived
	done    chan struct{} // closed when the update is over (or never happens)
}

// newHostKeyUpdater returns nil when OpenSSH would not update: the option
// is off, there is no user known_hosts file, or the key was not trusted
// from a user known_hosts file (sshconnect.c clears update_hostkeys for a
// certificate, a global file's key, a newly added or unsafe key).
func newHostKeyUpdater(s *Settings, hk *hostKeyChecker, log logrus.FieldLogger) *hostKeyUpdater {
	if !s.updateHostKeys || !hk.trusted || len(s.UserKnownHostsFiles) == 0 {
		return nil
	}
	u := &hostKeyUpdater{name: lookupName(s), hash: s.HashKnownHosts, log: log, done: make(chan struct{})}
	for _, f := range s.UserKnownHostsFiles {
		u.files = append(u.files, s.Env.abs(f))
	}
	u.algos = opensshHostKeyAlgos
	if s.HostKeyAlgorithmsExplicit {
		u.algos = s.HostKeyAlgorithms
	}
	return u
}

// filter takes the server's global requests: it refuses them, as ssh
// does, except the first hostkeys-00@openssh.com, whose update runs
// beside the connection (its proof is a round trip).
func (u *hostKeyUpdater) filter(in <-chan *ssh.Request, c *ssh.Client) {
	defer u.finish()
	for req := range in {
		if req.Type != hostKeysRequest {
			// As x/crypto's client and OpenSSH's: keepalives included.
			_ = req.Reply(false, nil)
			continue
		}
		u.started.Store(true)
		// ssh answers success (the request wants no reply).
		_ = req.Reply(true, nil)
		started := false
		u.once.Do(func() {
			started = true
			go func() {
				defer close(u.done)
				u.handle(c, req.Payload)
			}()
		})
		if !started {
			u.log.Debug("server sent hostkeys again; ignored")
		}
	}
}

// finish closes done when no update was started before the connection
// ended.
func (u *hostKeyUpdater) finish() {
	u.once.Do(func() { close(u.done) })
}

// acceptedByAlgos is key_accepted_by_hostkeyalgs.
func (u *hostKeyUpdater) acceptedByAlgos(k ssh.PublicKey) bool {
	if k.Type() == ssh.KeyAlgoRSA &&
		(slices.Contains(u.algos, ssh.KeyAlgoRSASHA256) || slices.Contains(u.algos, ssh.KeyAlgoRSASHA512)) {
		return true
	}
	return slices.Contains(u.algos, k.Type())
}

// handle is client_input_hostkeys and client_global_hostkeys_prove_confirm.
func (u *hostKeyUpdater) handle(c *ssh.Client, payload []byte) {
	var keys []ssh.PublicKey
	for rest := payload; len(rest) > 0; {
		var blob struct {
			Key  []byte
			Rest []byte `ssh:"rest"`
		}
		if err := ssh.Unmarshal(rest, &blob); err != nil {
			u.log.WithError(err).Warn("hostkeys: parse key")
			return
		}
		rest = blob.Rest
		k, err := ssh.ParsePublicKey(blob.Key)
		if err != nil {
			u.log.WithError(err).Debug("hostkeys: convert key")
			continue
		}
		if _, cert := k.(*ssh.Certificate); cert || !u.acceptedByAlgos(k) {
			continue
		}
		if slices.ContainsFunc(keys, func(o ssh.PublicKey) bool { return keysEqual(o, k) }) {
			u.log.Warnf("client_input_hostkeys: received duplicated %s host key", k.Type())
			return
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return
	}
	st, err := u.find(keys)
	if err != nil {
		u.log.WithError(err).Warn("hostkeys: reading known_hosts")
		return
	}
	var fresh []int
	for i, m := range st.match {
		if !m {
			fresh = append(fresh, i)
		}
	}
	switch {
	case len(fresh) == 0 && len(st.old) == 0:
		return
	case st.complex || st.otherName:
		u.log.Debug("hostkeys: marker, host list or other name in known_hosts; not updating")
		return
	case len(st.old) > 0 && u.oldElsewhere(st.old):
		u.log.Debug("hostkeys: deprecated keys exist under other names; not updating")
		return
	}
	if len(fresh) > 0 && !u.prove(c, keys, fresh) {
		return
	}
	u.update(keys)
}

// prove asks the server to sign each new key and verifies the
// signatures; an RSA key signed with SHA-1 is dropped from keys as ssh
// disregards it.
func (u *hostKeyUpdater) prove(c *ssh.Client, keys []ssh.PublicKey, fresh []int) bool {
	var req []byte
	for _, i := range fresh {
		req = append(req, ssh.Marshal(struct{ K []byte }{keys[i].Marshal()})...)
	}
	ok, resp, err := c.SendRequest(hostKeysProve, true, req)
	if err != nil {
		return false
	}
	if !ok {
		u.log.Warn("Server failed to confirm ownership of private host keys")
		return false
	}
	sid := c.SessionID()
	for _, i := range fresh {
		var s struct {
			Sig  []byte
			Rest []byte `ssh:"rest"`
		}
		if err := ssh.Unmarshal(resp, &s); err != nil {
			u.log.WithError(err).Warn("hostkeys: parse sig")
			return false
		}
		resp = s.Rest
		var sig ssh.Signature
		if err := ssh.Unmarshal(s.Sig, &sig); err != nil {
			u.log.Warnf("server gave unintelligible signature for %s key %d", keyTypeName(keys[i]), i)
			return false
		}
		// x/crypto does not tell which RSA algorithm the key exchange
		// used; sshd signs with it or with SHA-2, so SHA-2 is required.
		if keys[i].Type() == ssh.KeyAlgoRSA && sig.Format != ssh.KeyAlgoRSASHA256 && sig.Format != ssh.KeyAlgoRSASHA512 {
			keys[i] = nil
			continue
		}
		data := ssh.Marshal(struct {
			Name, SessionID, Key string
		}{hostKeysProve, string(sid), string(keys[i].Marshal())})
		if err := keys[i].Verify(data, &sig); err != nil {
			u.log.WithError(err).Warnf("server gave bad signature for %s key %d", keyTypeName(keys[i]), i)
			return false
		}
	}
	if len(resp) != 0 {
		u.log.Warn("hostkeys: protocol error")
		return false
	}
	return true
}

// hostLine is one known_hosts line as hostkeys_foreach sees it.
type hostLine struct {
	text    string
	marker  string
	hosts   string
	key     ssh.PublicKey // nil: comment, blank or invalid
	matched bool
}

// readHostLines reads path line by line, each matched against name.
func readHostLines(path, name string) ([]hostLine, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	parts := strings.Split(string(data), "\n")
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	out := make([]hostLine, 0, len(parts))
	for _, p := range parts {
		l := hostLine{text: p}
		t := strings.TrimLeft(p, " \t")
		if t == "" || t[0] == '#' {
			out = append(out, l)
			continue
		}
		marker, _, key, _, _, err := ssh.ParseKnownHosts([]byte(t))
		if err != nil {
			out = append(out, l)
			continue
		}
		if strings.HasPrefix(t, "@") {
			t = strings.TrimLeft(t[strings.IndexAny(t, " \t"):], " \t")
		}
		if i := strings.IndexAny(t, " \t"); i >= 0 {
			t = t[:i]
		}
		e := khEntry{hostsField: t, hosts: strings.Split(t, ",")}
		if strings.HasPrefix(t, "|") {
			if !strings.HasPrefix(t, "|1|") || len(strings.Split(t, "|")) != 4 {
				out = append(out, l) // a bad hash: an invalid line
				continue
			}
			e.hosts = []string{t}
		}
		l.marker, l.hosts, l.key, l.matched = marker, t, key, e.matches(name)
		out = append(out, l)
	}
	return out, nil
}

type findState struct {
	match     []bool // per key: on a line for the host
	old       []ssh.PublicKey
	complex   bool
	otherName bool
}

// find is hostkeys_find over the user files (CheckHostIP is never on
// here: it makes the bridge fall back).
func (u *hostKeyUpdater) find(keys []ssh.PublicKey) (*findState, error) {
	st := &findState{match: make([]bool, len(keys))}
	for _, f := range u.files {
		lines, err := readHostLines(f, u.name)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, l := range lines {
			if l.key == nil {
				continue
			}
			idx := slices.IndexFunc(keys, func(k ssh.PublicKey) bool { return keysEqual(k, l.key) })
			if !l.matched {
				if idx >= 0 {
					st.otherName = true
				}
				continue
			}
			if l.marker != "" || hostspecComplex(l.hosts) {
				st.complex = true
				continue
			}
			if idx >= 0 {
				st.match[idx] = true
				continue
			}
			st.old = append(st.old, l.key)
		}
	}
	return st, nil
}

// hostspecComplex is hostspec_is_complex: a wildcard, or more than
// host,ip.
func hostspecComplex(hosts string) bool {
	if strings.ContainsAny(hosts, "*?") {
		return true
	}
	return strings.Count(hosts, ",") > 1
}

// oldElsewhere is check_old_keys_othernames: a deprecated key on a line
// for another name.
func (u *hostKeyUpdater) oldElsewhere(old []ssh.PublicKey) bool {
	for _, f := range u.files {
		lines, err := readHostLines(f, u.name)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return true // ssh gives up on an unreadable file
		}
		for _, l := range lines {
			if l.matched || l.key == nil {
				continue
			}
			if slices.ContainsFunc(old, func(k ssh.PublicKey) bool { return keysEqual(k, l.key) }) {
				return true
			}
		}
	}
	return false
}

// update is update_known_hosts: keys go to the first file, the host's
// other lines leave every file.
func (u *hostKeyUpdater) update(keys []ssh.PublicKey) {
	for _, k := range keys {
		if k != nil {
			u.log.Debugf("Learned or kept hostkey: %s %s", keyTypeName(k), ssh.FingerprintSHA256(k))
		}
	}
	for i, f := range u.files {
		if _, err := os.Stat(f); err != nil {
			continue
		}
		var add []ssh.PublicKey
		if i == 0 {
			add = keys
		}
		if err := replaceHostEntries(f, u.name, add, u.hash); err != nil {
			u.log.WithError(err).Warnf("hostfile_replace_entries failed for %s", f)
		}
	}
}

// replaceHostEntries is hostfile_replace_entries without an address:
// name's plain lines whose key is not in keys are dropped, keys not yet
// there are appended, and a changed file replaces the old one through a
// 0600 temporary, the old one kept as FILE.old.
func replaceHostEntries(file, name string, keys []ssh.PublicKey, hash bool) error {
	lines, err := readHostLines(file, name)
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	var buf bytes.Buffer
	have := make([]bool, len(keys))
	modified := false
	for _, l := range lines {
		if l.key != nil && l.matched && l.marker == "" {
			idx := slices.IndexFunc(keys, func(k ssh.PublicKey) bool { return k != nil && keysEqual(k, l.key) })
			if idx < 0 {
				modified = true
				continue
			}
			have[idx] = true
		}
		buf.WriteString(l.text + "\n")
	}
	for i, k := range keys {
		if k == nil || have[i] {
			continue
		}
		host := strings.ToLower(name)
		if hash {
			host = hashName(host)
		}
		buf.WriteString(host + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))) + "\n")
		modified = true
	}
	if !modified {
		return nil
	}
	// mkstemp's name and mode (ssh runs it under umask 077).
	tmp, err := os.CreateTemp(filepath.Dir(file), filepath.Base(file)+".*")
	if err != nil {
		return fmt.Errorf("mkstemp: %w", err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	back := file + ".old"
	if err := os.Remove(back); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("unlink %s: %w", back, err)
	}
	if err := os.Link(file, back); err != nil {
		return fmt.Errorf("link %s to %s: %w", file, back, err)
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return fmt.Errorf("rename %s to %s: %w", tmp.Name(), file, err)
	}
	return nil
}
