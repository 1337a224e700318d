package sshclient

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// ErrHostKey is wrapped by every host key verification failure.
var ErrHostKey = errors.New("host key verification failed")

// khEntry is one parsed known_hosts line.
type khEntry struct {
	path, display string // file as opened and as configured (for messages)
	line          int
	marker        string   // "", "revoked" or "cert-authority"
	hostsField    string   // the host field verbatim
	hosts         []string // patterns, or one hashed "|1|salt|hash"
	key           ssh.PublicKey
}

// matches reports whether the entry applies to name (OpenSSH's
// hostfile.c: hashed names compare HMAC-SHA1, patterns use
// match_hostname with negation).
func (e *khEntry) matches(name string) bool {
	if len(e.hosts) == 1 && strings.HasPrefix(e.hosts[0], "|1|") {
		return hashedMatch(e.hosts[0], name)
	}
	return matchPatternList(name, strings.Join(e.hosts, ","), true) == 1
}

func hashedMatch(entry, name string) bool {
	parts := strings.Split(entry, "|")
	if len(parts) != 4 {
		return false
	}
	salt, err1 := base64.StdEncoding.DecodeString(parts[2])
	want, err2 := base64.StdEncoding.DecodeString(parts[3])
	if err1 != nil || err2 != nil {
		return false
	}
	mac := hmac.New(sha1.New, salt)
	mac.Write([]byte(name))
	return hmac.Equal(mac.Sum(nil), want)
}

// hashName returns name hashed the way ssh-keygen -H and HashKnownHosts do.
func hashName(name string) string {
	salt := make([]byte, sha1.Size)
	_, _ = rand.Read(salt)
	mac := hmac.New(sha1.New, salt)
	mac.Write([]byte(name))
	return "|1|" + base64.StdEncoding.EncodeToString(salt) + "|" + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// loadKnownHosts parses the given files; missing files and malformed
// lines are skipped as OpenSSH does. Parsing each line is left to
// ssh.ParseKnownHosts; matching is ours because x/crypto's knownhosts
// callback only compares the first key of each type and stops at the
// first malformed line, while OpenSSH accepts any matching entry.
func loadKnownHosts(paths, displays []string) []khEntry {
	var out []khEntry
	for i, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		disp := p
		if i < len(displays) {
			disp = displays[i]
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for n := 1; sc.Scan(); n++ {
			ln := bytes.TrimSpace(sc.Bytes())
			if len(ln) == 0 || ln[0] == '#' {
				continue
			}
			marker, hosts, key, _, _, err := ssh.ParseKnownHosts(ln)
			if err != nil {
				continue
			}
			field := string(ln)
			if strings.HasPrefix(field, "@") {
				field = strings.TrimLeft(field[strings.IndexAny(field, " \t"):], " \t")
			}
			if i := strings.IndexAny(field, " \t"); i >= 0 {
				field = field[:i]
			}
			out = append(out, khEntry{path: p, display: disp, line: n, marker: marker,
				hostsField: field, hosts: hosts, key: key})
		}
	}
	return out
}

// lookupName is the known_hosts name for s: HostKeyAlias, or the host
// name, as "[host]:port" when the port is not 22.
func lookupName(s *Settings) string {
	if s.HostKeyAlias != "" {
		return s.HostKeyAlias
	}
	return knownhosts.Normalize(net.JoinHostPort(s.HostName, strconv.Itoa(s.Port)))
}

// keyTypeName is OpenSSH's sshkey_type() for messages ("ED25519", ...).
func keyTypeName(k ssh.PublicKey) string {
	t := k.Type()
	cert := strings.HasSuffix(t, "-cert-v01@openssh.com")
	t = strings.TrimSuffix(t, "-cert-v01@openssh.com")
	var n string
	switch {
	case t == ssh.KeyAlgoRSA || strings.HasPrefix(t, "rsa-sha2-"):
		n = "RSA"
	case t == keyAlgoDSA:
		n = "DSA"
	case strings.HasPrefix(t, "ecdsa-sha2-"):
		n = "ECDSA"
	case t == ssh.KeyAlgoED25519:
		n = "ED25519"
	case strings.HasPrefix(t, "sk-ecdsa-"):
		n = "ECDSA-SK"
	case strings.HasPrefix(t, "sk-ssh-ed25519"):
		n = "ED25519-SK"
	default:
		n = strings.ToUpper(t)
	}
	if cert {
		n += "-CERT"
	}
	return n
}

func keysEqual(a, b ssh.PublicKey) bool {
	return a != nil && b != nil && bytes.Equal(a.Marshal(), b.Marshal())
}

// opensshHostKeyAlgos is OpenSSH 9.2's default HostKeyAlgorithms.
var opensshHostKeyAlgos = []string{
	ssh.CertAlgoED25519v01, ssh.CertAlgoECDSA256v01, ssh.CertAlgoECDSA384v01, ssh.CertAlgoECDSA521v01,
	"sk-ssh-ed25519-cert-v01@openssh.com", "sk-ecdsa-sha2-nistp256-cert-v01@openssh.com",
	ssh.CertAlgoRSASHA512v01, ssh.CertAlgoRSASHA256v01,
	ssh.KeyAlgoED25519, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
	ssh.KeyAlgoSKED25519, ssh.KeyAlgoSKECDSA256, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256,
}

// hostKeyAlgorithms orders the host key algorithms like OpenSSH's
// order_hostkeyalgs: those of key types already known for the host (and
// certificates when a CA is known) first, the rest after, each part in the
// default order (or base's, the configured HostKeyAlgorithms, which
// Settings has already cut to what x/crypto implements). From the
// default, algorithms x/crypto does not implement are dropped.
func hostKeyAlgorithms(entries []khEntry, name string, base []string) []string {
	if base == nil {
		supported := ssh.SupportedAlgorithms().HostKeys
		base = slices.DeleteFunc(slices.Clone(opensshHostKeyAlgos), func(a string) bool { return !slices.Contains(supported, a) })
	}
	knownType := map[string]bool{}
	ca := false
	for i := range entries {
		e := &entries[i]
		if !e.matches(name) {
			continue
		}
		switch e.marker {
		case "":
			knownType[e.key.Type()] = true
		case "cert-authority":
			ca = true
		}
	}
	var first, rest []string
	for _, a := range base {
		plain := strings.TrimSuffix(a, "-cert-v01@openssh.com")
		isCert := plain != a
		if strings.HasPrefix(plain, "rsa-sha2-") {
			plain = ssh.KeyAlgoRSA
		}
		if (isCert && ca) || (!isCert && knownType[plain]) {
			first = append(first, a)
		} else {
			rest = append(rest, a)
		}
	}
	return append(first, rest...)
}

// hostKeyChecker verifies the server's host key like OpenSSH's
// check_host_key and records what happened for Dial.
type hostKeyChecker struct {
	ctx     context.Context
	s       *Settings
	p       Prompter
	rep     *reporter
	hostIP  string // "[ip]:port", "ip" or "<no hostip for proxy command>"
	entries []khEntry

	fail         *ConnError // set when verification refused the key
	trusted      bool       // found in a user known_hosts file, or confirmed (UpdateHostKeys may run)
	userFiles    map[string]bool
	noMITMMethod bool // password/kbd-interactive disabled (changed key, StrictHostKeyChecking=no)
	accepted     ssh.PublicKey
}

func newHostKeyChecker(ctx context.Context, s *Settings, p Prompter, rep *reporter) *hostKeyChecker {
	files := append(slices.Clone(s.UserKnownHostsFiles), s.GlobalKnownHostsFiles...)
	disp := append(slices.Clone(s.userKHDisplay), s.globalKHDisplay...)
	for i, f := range files {
		files[i] = s.Env.abs(f) // read from the shim's directory, as written
	}
	if len(disp) != len(files) {
		disp = files
	}
	user := map[string]bool{}
	for _, f := range files[:len(s.UserKnownHostsFiles)] {
		user[f] = true
	}
	return &hostKeyChecker{ctx: ctx, s: s, p: p, rep: rep, entries: loadKnownHosts(files, disp), userFiles: user}
}

// callback is the ssh.HostKeyCallback. x/crypto calls it again at every
// re-key; like OpenSSH, later calls only require the key accepted first.
func (c *hostKeyChecker) callback(_ string, _ net.Addr, key ssh.PublicKey) error {
	if c.accepted != nil {
		if keysEqual(c.accepted, key) {
			return nil
		}
		return fmt.Errorf("%w: server host key changed during re-key", ErrHostKey)
	}
	err := c.check(key)
	if err == nil {
		c.accepted = key
	}
	if err != nil && c.fail == nil {
		c.fail = failure(c.s.LogLevel, err, fatalLine("Host key verification failed."))
	}
	return err
}

func (c *hostKeyChecker) check(key ssh.PublicKey) error {
	name := lookupName(c.s)
	if cert, ok := key.(*ssh.Certificate); ok {
		if c.certOK(cert, name) {
			return nil
		}
		// No trusted CA: OpenSSH retries with the plain key.
		key = cert.Key
	}
	for i := range c.entries {
		e := &c.entries[i]
		if e.marker == "revoked" && keysEqual(e.key, key) && e.matches(name) {
			return c.revoked(key, name)
		}
	}
	var offending *khEntry
	for i := range c.entries {
		e := &c.entries[i]
		if e.marker != "" || !e.matches(name) {
			continue
		}
		if keysEqual(e.key, key) {
			// sshconnect.c turns UpdateHostKeys off for a global file's key.
			c.trusted = c.userFiles[e.path]
			return nil
		}
		offending = e
	}
	if offending != nil {
		return c.changed(key, name, offending)
	}
	if c.knownWithoutPort(key) {
		return nil
	}
	if c.readonly() {
		// ssh cannot record the key, so it refuses it without asking
		// and whatever StrictHostKeyChecking says.
		return fmt.Errorf("%w: unknown host %s, no known_hosts file to record it in", ErrHostKey, name)
	}
	return c.unknown(key, name)
}

// readonly is when check_host_key may not write a user known_hosts file:
// there is none (UserKnownHostsFile none), or the host name holds a
// character a known_hosts name must not.
func (c *hostKeyChecker) readonly() bool {
	return len(c.s.UserKnownHostsFiles) == 0 || strings.ContainsAny(c.s.HostName, "@?*#[]|'\"\\")
}

// knownWithoutPort is OpenSSH's fallback for a host on another port than
// 22 that known_hosts does not name as "[host]:port" at all: the key is
// accepted when an entry for the bare host name holds it ("found matching
// key w/out port"). HostKeyAlias turns the fallback off.
func (c *hostKeyChecker) knownWithoutPort(key ssh.PublicKey) bool {
	if c.s.HostKeyAlias != "" || c.s.Port == 22 || c.s.Port == 0 {
		return false
	}
	bare := knownhosts.Normalize(net.JoinHostPort(c.s.HostName, "22"))
	for i := range c.entries {
		e := &c.entries[i]
		if e.marker == "" && keysEqual(e.key, key) && e.matches(bare) {
			return true
		}
	}
	return false
}

func (c *hostKeyChecker) certOK(cert *ssh.Certificate, name string) bool {
	var cas []ssh.PublicKey
	for i := range c.entries {
		e := &c.entries[i]
		if e.marker == "cert-authority" && e.matches(name) {
			cas = append(cas, e.key)
		}
	}
	if len(cas) == 0 {
		return false
	}
	checker := &ssh.CertChecker{IsHostAuthority: func(auth ssh.PublicKey, _ string) bool {
		return slices.ContainsFunc(cas, func(k ssh.PublicKey) bool { return keysEqual(k, auth) })
	}}
	principal := c.s.HostKeyAlias
	if principal == "" {
		principal = c.s.HostName
	}
	return checker.CheckHostKey(net.JoinHostPort(principal, "22"), &net.TCPAddr{}, cert) == nil
}

func (c *hostKeyChecker) unknown(key ssh.PublicKey, name string) error {
	typ := keyTypeName(key)
	switch c.s.StrictHostKeyChecking {
	case "yes":
		c.fail = failure(c.s.LogLevel, ErrHostKey,
			errorLine(fmt.Sprintf("No %s host key is known for %.200s and you have requested strict checking.", typ, name)),
			fatalLine("Host key verification failed."))
		return fmt.Errorf("%w: unknown host %s", ErrHostKey, name)
	case "ask":
		if c.s.BatchMode || c.p == nil || !c.confirm(key, name) {
			c.fail = failure(c.s.LogLevel, ErrHostKey, fatalLine("Host key verification failed."))
			return fmt.Errorf("%w: unknown host %s not confirmed", ErrHostKey, name)
		}
		c.trusted = true // explicitly confirmed
	}
	// accept-new, no, or confirmed: record the key.
	c.add(key, name)
	return nil
}

// confirm asks like OpenSSH's "The authenticity of host ..." prompt.
func (c *hostKeyChecker) confirm(key ssh.PublicKey, name string) bool {
	fp := ssh.FingerprintSHA256(key)
	var b strings.Builder
	fmt.Fprintf(&b, "The authenticity of host '%.200s (%s)' can't be established.\n", name, c.hostIP)
	fmt.Fprintf(&b, "%s key fingerprint is %s.\n", keyTypeName(key), fp)
	var others []string
	for i := range c.entries {
		e := &c.entries[i]
		if e.marker != "" || !keysEqual(e.key, key) || e.matches(name) {
			continue
		}
		h := e.hostsField
		if strings.HasPrefix(h, "|1|") {
			h = "[hashed name]"
		}
		others = append(others, fmt.Sprintf("    %s:%d: %s\n", e.display, e.line, h))
	}
	if len(others) == 0 {
		b.WriteString("This key is not known by any other names.\n")
	} else {
		b.WriteString("This host key is known by the following other names/addresses:\n")
		const maxOther = 8
		for i, o := range others {
			if i == maxOther {
				fmt.Fprintf(&b, "    (%d additional names omitted)\n", len(others)-maxOther)
				break
			}
			b.WriteString(o)
		}
	}
	b.WriteString("Are you sure you want to continue connecting (yes/no/[fingerprint])? ")
	prompt := b.String()
	for {
		ans, err := c.p.Prompt(c.ctx, prompt, true)
		if err != nil {
			return false
		}
		ans = strings.TrimSpace(ans)
		switch {
		case ans == "" || strings.HasPrefix(strings.ToLower(ans), "no"):
			return false
		case strings.EqualFold(ans, "yes") || ans == fp:
			return true
		}
		prompt = "Please type 'yes', 'no' or the fingerprint: "
	}
}

// add appends the key to the first user known_hosts file like OpenSSH's
// add_host_to_hostfile, and reports the outcome.
func (c *hostKeyChecker) add(key ssh.PublicKey, name string) {
	if len(c.s.UserKnownHostsFiles) == 0 {
		return
	}
	file := c.s.Env.abs(c.s.UserKnownHostsFiles[0])
	host := name
	if c.s.HashKnownHosts {
		host = hashName(name)
	}
	line := host + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))) + "\n"
	c.createUserSSHDir(file)
	if err := appendKnownHost(file, line, os.FileMode(0o666&^(c.s.Env.Umask|0o022))); err != nil {
		c.rep.line(lvlInfo, fmt.Sprintf("Failed to add the host to the list of known hosts (%.500s).", c.s.UserKnownHostsFiles[0]))
		return
	}
	c.rep.line(lvlInfo, fmt.Sprintf("Warning: Permanently added '%.200s' (%s) to the list of known hosts.", name, keyTypeName(key)))
}

// createUserSSHDir makes ~/.ssh (0700) when file lives there and it is
// missing, saying at error level why it could not, as ssh's
// hostfile_create_user_ssh_dir does (a read-only home prints "Could not
// create directory" even under LogLevel ERROR).
func (c *hostKeyChecker) createUserSSHDir(file string) {
	home := c.s.Env.Home
	if home == "" {
		return
	}
	dot := filepath.Join(home, ".ssh")
	if filepath.Dir(file) != dot {
		return
	}
	_, err := os.Stat(dot)
	switch {
	case err == nil:
	case !errors.Is(err, fs.ErrNotExist):
		c.rep.line(lvlError, fmt.Sprintf("Could not stat %s: %s", dot, strerror(err)))
	default:
		if err := os.Mkdir(dot, 0o700); err != nil {
			c.rep.line(lvlError, fmt.Sprintf("Could not create directory '%.200s' (%s).", dot, strerror(err)))
		}
	}
}

// appendKnownHost appends line to file with O_APPEND, creating it with
// mode exactly (not under the daemon's own umask).
func appendKnownHost(file, line string, mode os.FileMode) error {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, mode)
	switch {
	case err == nil:
		err = f.Chmod(mode)
	case errors.Is(err, fs.ErrExist):
		// O_CREATE still: a dangling symlink's target is made, as by fopen.
		f, err = os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, mode)
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		return err
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

var changedBanner = []string{
	"@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@",
	"@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @",
	"@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@",
	"IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!",
	"Someone could be eavesdropping on you right now (man-in-the-middle attack)!",
	"It is also possible that a host key has just been changed.",
}

func (c *hostKeyChecker) changed(key ssh.PublicKey, name string, off *khEntry) error {
	var lines []msgLine
	for _, l := range changedBanner {
		lines = append(lines, errorLine(l))
	}
	lines = append(lines,
		errorLine(fmt.Sprintf("The fingerprint for the %s key sent by the remote host is\n%s.", keyTypeName(key), ssh.FingerprintSHA256(key))),
		errorLine("Please contact your system administrator."))
	// The first user file, else the first global one, else nothing.
	if files := append(slices.Clone(c.s.UserKnownHostsFiles), c.s.GlobalKnownHostsFiles...); len(files) > 0 {
		lines = append(lines, errorLine(fmt.Sprintf("Add correct host key in %.100s to get rid of this message.", files[0])))
	}
	lines = append(lines,
		errorLine(fmt.Sprintf("Offending %s key in %s:%d", keyTypeName(off.key), off.path, off.line)),
		errorLine("  remove with:"),
		errorLine(fmt.Sprintf("  ssh-keygen -f \"%s\" -R \"%s\"", off.path, name)),
	)
	if c.s.StrictHostKeyChecking != "no" {
		lines = append(lines,
			errorLine(fmt.Sprintf("Host key for %.200s has changed and you have requested strict checking.", name)),
			fatalLine("Host key verification failed."))
		c.fail = failure(c.s.LogLevel, ErrHostKey, lines...)
		return fmt.Errorf("%w: host key for %s has changed", ErrHostKey, name)
	}
	for _, l := range lines {
		c.rep.line(l.lvl, l.text)
	}
	c.continueUnsafe()
	return nil
}

func (c *hostKeyChecker) revoked(key ssh.PublicKey, name string) error {
	typ := keyTypeName(key)
	lines := []msgLine{
		errorLine("@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@"),
		errorLine("@       WARNING: REVOKED HOST KEY DETECTED!               @"),
		errorLine("@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@"),
		errorLine(fmt.Sprintf("The %s host key for %s is marked as revoked.", typ, name)),
		errorLine("This could mean that a stolen key is being used to"),
		errorLine("impersonate this host."),
	}
	if c.s.StrictHostKeyChecking != "no" {
		lines = append(lines,
			errorLine(fmt.Sprintf("%s host key for %.200s was revoked and you have requested strict checking.", typ, name)),
			fatalLine("Host key verification failed."))
		c.fail = failure(c.s.LogLevel, ErrHostKey, lines...)
		return fmt.Errorf("%w: host key for %s is revoked", ErrHostKey, name)
	}
	for _, l := range lines {
		c.rep.line(l.lvl, l.text)
	}
	c.continueUnsafe()
	return nil
}

// continueUnsafe is OpenSSH's continue_unsafe: the connection goes on
// without the authentication methods a man in the middle could harvest.
func (c *hostKeyChecker) continueUnsafe() {
	c.noMITMMethod = true
	if c.s.PasswordAuthentication {
		c.rep.line(lvlError, "Password authentication is disabled to avoid man-in-the-middle attacks.")
	}
	if c.s.KbdInteractiveAuthentication {
		c.rep.line(lvlError, "Keyboard-interactive authentication is disabled to avoid man-in-the-middle attacks.")
	}
	if c.s.updateHostKeys {
		c.rep.line(lvlError, "UpdateHostkeys is disabled because the host key is not trusted.")
	}
}

// keyAlgoDSA names ssh-dss keys, which the bridge never offers or
// accepts (x/crypto deprecates its constant).
const keyAlgoDSA = "ssh-dss"
