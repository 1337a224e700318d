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
	"time"

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
// order_hostkeyalgs: as they are when a key of the first one's type is
// known for the host, else those of key types already known for the host
// (and certificates when a CA is known) first, the rest after, each part in the
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
	// A known key of the best algorithm's type: the list as it is
	// (certificates first, so that a known plain key does not bypass a
	// CA's checks and revocation).
	if len(base) > 0 && knownType[plainKeyType(base[0])] {
		return base
	}
	var first, rest []string
	for _, a := range base {
		isCert := strings.HasSuffix(a, "-cert-v01@openssh.com")
		if (isCert && ca) || (!isCert && knownType[plainKeyType(a)]) {
			first = append(first, a)
		} else {
			rest = append(rest, a)
		}
	}
	return append(first, rest...)
}

// plainKeyType is the key type of algorithm a's plain keys.
func plainKeyType(a string) string {
	a = strings.TrimSuffix(a, "-cert-v01@openssh.com")
	if strings.HasPrefix(a, "rsa-sha2-") {
		return ssh.KeyAlgoRSA
	}
	return a
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
	msgs         []msgLine // the check's messages so far (say)
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
	if err != nil {
		if c.fail == nil {
			c.fail = failure(c.s.LogLevel, err, append(c.msgs, fatalLine("Host key verification failed."))...)
		}
		c.msgs = nil
		return err
	}
	c.flush()
	c.accepted = key
	return nil
}

// say queues a message of the check: on success the messages are
// reported, on failure they lead the ConnError, in ssh's order.
func (c *hostKeyChecker) say(l msgLine) { c.msgs = append(c.msgs, l) }

// flush reports the queued messages (before a prompt, and at the end).
func (c *hostKeyChecker) flush() {
	for _, l := range c.msgs {
		c.rep.line(l.lvl, l.text)
	}
	c.msgs = nil
}

// check_host_key's readonly argument.
const (
	rdrw    = iota
	rdonly  // the key may not be recorded
	roquiet // and a changed key fails without a word (the check without the port)
)

// errRevoked marks a revoked key's failure: unlike the others, it does
// not send a certificate on to the check of its plain key.
var errRevoked = errors.New("revoked host key")

// check is OpenSSH's check_host_key for the first key the server shows.
func (c *hostKeyChecker) check(key ssh.PublicKey) error {
	mode := rdrw
	// A name known_hosts must not hold is never written.
	if strings.ContainsAny(c.s.HostName, "@?*#[]|'\"\\") {
		mode = rdonly
	}
	if cert, ok := key.(*ssh.Certificate); ok {
		// ssh refuses a badly signed certificate as it parses it,
		// before any check; x/crypto leaves the signature to us.
		if err := cert.SignatureKey.Verify(certSignedBytes(cert), cert.Signature); err != nil {
			return fmt.Errorf("%w: host certificate: %w", ErrHostKey, err)
		}
	}
	return c.checkHostKey(key, c.s.Port, mode)
}

// checkHostKey is check_host_key for the known_hosts name with port (0
// for the check without it): a certificate no CA vouches for (or that
// fails its checks) is checked again as its plain key, unless revoked.
func (c *hostKeyChecker) checkHostKey(key ssh.PublicKey, port, mode int) error {
	// With no user file, ssh cannot record the key.
	if mode == rdrw && len(c.s.UserKnownHostsFiles) == 0 {
		mode = rdonly
	}
	err := c.checkKey(key, port, mode)
	if cert, ok := key.(*ssh.Certificate); ok && err != nil && !errors.Is(err, errRevoked) {
		return c.checkKey(cert.Key, port, mode)
	}
	return err
}

// hostStatus is hostfile.h's HostStatus.
type hostStatus int

const (
	hostOK hostStatus = iota
	hostNew
	hostChanged
	hostRevoked
)

// lookup is hostfile.c's check_key_in_hostkeys over the entries for
// name: a certificate is looked up by its CA among @cert-authority lines,
// a plain key among plain lines (another key there: changed); either is
// revoked when an @revoked line holds it, its plain key or its CA.
func (c *hostKeyChecker) lookup(key ssh.PublicKey, name string) (hostStatus, *khEntry) {
	cert, wantCert := key.(*ssh.Certificate)
	want := ""
	if wantCert {
		want = "cert-authority"
	}
	status, found := hostNew, (*khEntry)(nil)
	for i := range c.entries {
		e := &c.entries[i]
		if e.marker != want || !e.matches(name) {
			continue
		}
		if wantCert {
			if equalPublic(cert.SignatureKey, e.key) {
				status, found = hostOK, e
				break
			}
			continue
		}
		if keysEqual(key, e.key) {
			status, found = hostOK, e
			break
		}
		status, found = hostChanged, e
	}
	for i := range c.entries {
		e := &c.entries[i]
		if e.marker == "revoked" && e.matches(name) &&
			(equalPublic(key, e.key) || wantCert && equalPublic(cert.SignatureKey, e.key)) {
			return hostRevoked, nil
		}
	}
	return status, found
}

// equalPublic is sshkey_equal_public: the same key, certificate or not.
func equalPublic(a, b ssh.PublicKey) bool {
	if c, ok := a.(*ssh.Certificate); ok {
		a = c.Key
	}
	if c, ok := b.(*ssh.Certificate); ok {
		b = c.Key
	}
	return keysEqual(a, b)
}

// hostfileName is get_hostfile_hostname_ipaddr's name: HostKeyAlias, or
// the host name, as "[host]:port" for a port other than 0 and 22.
func (c *hostKeyChecker) hostfileName(port int) string {
	if c.s.HostKeyAlias != "" {
		return c.s.HostKeyAlias
	}
	if port == 0 || port == 22 {
		return c.s.HostName
	}
	return "[" + c.s.HostName + "]:" + strconv.Itoa(port)
}

// checkKey is one pass of check_host_key (from its retry label) for key.
func (c *hostKeyChecker) checkKey(key ssh.PublicKey, port, mode int) error {
	name := c.hostfileName(port)
	cert, wantCert := key.(*ssh.Certificate)
	status, found := c.lookup(key, name)
	switch status {
	case hostOK:
		if wantCert {
			principal := c.s.HostKeyAlias
			if principal == "" {
				principal = c.s.HostName
			}
			if reason := certInvalid(cert, principal, time.Now()); reason != "" {
				c.say(errorLine(reason))
				return fmt.Errorf("%w: %s", ErrHostKey, reason)
			}
			// ssh does not update the host keys of a certified host.
			return nil
		}
		// sshconnect.c turns UpdateHostKeys off for a global file's key.
		c.trusted = c.userFiles[found.path]
		return nil
	case hostNew:
		if c.s.HostKeyAlias == "" && port != 0 && port != 22 {
			// "checking without port identifier"
			if c.checkHostKey(key, 0, roquiet) == nil {
				// "found matching key w/out port": not trusted for
				// UpdateHostKeys, which is the outer check's to grant.
				c.trusted = false
				return nil
			}
		}
		if mode != rdrw || wantCert {
			return fmt.Errorf("%w: no known key for %s", ErrHostKey, name)
		}
		return c.unknown(key, name)
	case hostRevoked:
		return c.revoked(key, name)
	default:
		if mode == roquiet {
			return fmt.Errorf("%w: another key is known for %s", ErrHostKey, name)
		}
		return c.changed(key, name, found)
	}
}

// certInvalid is sshkey_cert_check_host's reason for refusing a host
// certificate signed by a trusted CA, "" if it is valid for principal.
func certInvalid(cert *ssh.Certificate, principal string, now time.Time) string {
	t := uint64(now.Unix())
	switch {
	case cert.CertType != ssh.HostCert:
		return "Certificate invalid: not a host certificate"
	case t < cert.ValidAfter:
		return "Certificate invalid: not yet valid"
	case t >= cert.ValidBefore:
		return "Certificate invalid: expired"
	case len(cert.ValidPrincipals) > 0 && !slices.Contains(cert.ValidPrincipals, principal):
		return "Certificate invalid: name is not a listed principal"
	case len(cert.CriticalOptions) > 0:
		return "Certificate contains unsupported critical options"
	case !slices.Contains(algoCASig.defaults, cert.Signature.Format):
		return "Certificate signed with disallowed algorithm"
	}
	return ""
}

// certSignedBytes is what the CA signed: the certificate without its
// signature (x/crypto's bytesForSigning).
func certSignedBytes(cert *ssh.Certificate) []byte {
	c2 := *cert
	c2.Signature = nil
	out := c2.Marshal()
	// Drop the trailing length-prefixed empty signature.
	return out[:len(out)-4]
}

func (c *hostKeyChecker) unknown(key ssh.PublicKey, name string) error {
	typ := keyTypeName(key)
	switch c.s.StrictHostKeyChecking {
	case "yes":
		c.say(errorLine(fmt.Sprintf("No %s host key is known for %.200s and you have requested strict checking.", typ, name)))
		return fmt.Errorf("%w: unknown host %s", ErrHostKey, name)
	case "ask":
		if c.s.BatchMode || c.p == nil || !c.confirm(key, name) {
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
	c.flush() // what ssh printed before it asks
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
		c.say(msgLine{lvlInfo, fmt.Sprintf("Failed to add the host to the list of known hosts (%.500s).", c.s.UserKnownHostsFiles[0])})
		return
	}
	c.say(msgLine{lvlInfo, fmt.Sprintf("Warning: Permanently added '%.200s' (%s) to the list of known hosts.", name, keyTypeName(key))})
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
		c.say(errorLine(fmt.Sprintf("Could not stat %s: %s", dot, strerror(err))))
	default:
		if err := os.Mkdir(dot, 0o700); err != nil {
			c.say(errorLine(fmt.Sprintf("Could not create directory '%.200s' (%s).", dot, strerror(err))))
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
	for _, l := range changedBanner {
		c.say(errorLine(l))
	}
	c.say(errorLine(fmt.Sprintf("The fingerprint for the %s key sent by the remote host is\n%s.", keyTypeName(key), ssh.FingerprintSHA256(key))))
	c.say(errorLine("Please contact your system administrator."))
	// The first user file, else the first global one, else nothing.
	if files := append(slices.Clone(c.s.UserKnownHostsFiles), c.s.GlobalKnownHostsFiles...); len(files) > 0 {
		c.say(errorLine(fmt.Sprintf("Add correct host key in %.100s to get rid of this message.", files[0])))
	}
	c.say(errorLine(fmt.Sprintf("Offending %s key in %s:%d", keyTypeName(off.key), off.path, off.line)))
	c.say(errorLine("  remove with:"))
	c.say(errorLine(fmt.Sprintf("  ssh-keygen -f \"%s\" -R \"%s\"", off.path, name)))
	if c.s.StrictHostKeyChecking != "no" {
		c.say(errorLine(fmt.Sprintf("Host key for %.200s has changed and you have requested strict checking.", name)))
		return fmt.Errorf("%w: host key for %s has changed", ErrHostKey, name)
	}
	c.continueUnsafe()
	return nil
}

func (c *hostKeyChecker) revoked(key ssh.PublicKey, name string) error {
	typ := keyTypeName(key)
	for _, l := range []string{
		"@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@",
		"@       WARNING: REVOKED HOST KEY DETECTED!               @",
		"@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@",
		fmt.Sprintf("The %s host key for %s is marked as revoked.", typ, name),
		"This could mean that a stolen key is being used to",
		"impersonate this host.",
	} {
		c.say(errorLine(l))
	}
	if c.s.StrictHostKeyChecking != "no" {
		c.say(errorLine(fmt.Sprintf("%s host key for %.200s was revoked and you have requested strict checking.", typ, name)))
		return fmt.Errorf("%w: %w: host key for %s", ErrHostKey, errRevoked, name)
	}
	c.continueUnsafe()
	return nil
}

// continueUnsafe is OpenSSH's continue_unsafe: the connection goes on
// without the authentication methods a man in the middle could harvest.
func (c *hostKeyChecker) continueUnsafe() {
	if c.s.PasswordAuthentication && !c.noMITMMethod {
		c.say(errorLine("Password authentication is disabled to avoid man-in-the-middle attacks."))
	}
	if c.s.KbdInteractiveAuthentication && !c.noMITMMethod {
		c.say(errorLine("Keyboard-interactive authentication is disabled to avoid man-in-the-middle attacks."))
	}
	if c.s.updateHostKeys && !c.noMITMMethod {
		c.say(errorLine("UpdateHostkeys is disabled because the host key is not trusted."))
	}
	c.noMITMMethod = true
}

// keyAlgoDSA names ssh-dss keys, which the bridge never offers or
// accepts (x/crypto deprecates its constant).
const keyAlgoDSA = "ssh-dss"
