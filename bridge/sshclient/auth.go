package sshclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/sirupsen/logrus"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// ErrPermissionDenied is wrapped by authentication failures.
var ErrPermissionDenied = errors.New("permission denied")

// identity is one public key offered to the server.
type identity struct {
	name   string        // file name as configured, or the agent's comment
	path   string        // private key file ("" for agent-only keys)
	pub    ssh.PublicKey // nil until the private key is loaded, when no public part is readable
	agent  ssh.Signer    // the agent holds this key
	signer ssh.Signer    // loaded private key
	raw    any           // signer's private key, overwritten by wipe
	tried  bool          // private key load attempted
	// missing is why a configured file could not be read: tried in its
	// turn, it only says so (sshconnect2.c's load_identity_file).
	missing error
}

// authState drives authentication like OpenSSH's sshconnect2.c: methods in
// PreferredAuthentications order among those the server allows, each
// retried while it has something left (keys, password prompts), starting
// over when the server's list changes. It is the x/crypto AuthCallback.
type authState struct {
	ctx context.Context
	s   *Settings
	p   Prompter
	rep *reporter
	log logrus.FieldLogger
	hk  *hostKeyChecker

	supported string // the server's list, as last received
	pos       int    // next index into PreferredAuthentications
	current   string
	disabled  map[string]bool

	ids       []*identity
	idNext    int
	prepared  bool
	agentConn net.Conn

	pwAttempts, kbdAttempts int

	denied *ConnError
	abort  error
}

func newAuthState(ctx context.Context, s *Settings, p Prompter, rep *reporter, log logrus.FieldLogger, hk *hostKeyChecker) *authState {
	return &authState{ctx: ctx, s: s, p: p, rep: rep, log: log, hk: hk, disabled: map[string]bool{}}
}

// close releases the agent connection and overwrites the private keys
// loaded: x/crypto keeps the ClientConfig, and through its AuthCallback
// this state, for re-keying as long as the connection lasts, while
// OpenSSH frees its keys once authenticated. A later login (a redial)
// loads them again, asking for their passphrase again as ssh would.
func (a *authState) close() {
	if a.agentConn != nil {
		a.agentConn.Close()
	}
	loaded := false
	for _, id := range a.ids {
		loaded = loaded || id.raw != nil
		wipeKey(id.raw)
		id.raw, id.signer, id.agent = nil, nil, nil
	}
	a.ids = nil
	if loaded {
		// What x/crypto drops unwiped (the decrypted key file, the
		// passphrase's hash states) is overwritten once collected (the
		// daemon runs with GODEBUG=clobberfree=1): now, or within two
		// seconds when logins come at once, not at the next collection,
		// which an idle daemon may not run for minutes. The expanded key
		// crypto/ed25519 (and rsa, ecdsa) caches until the key is
		// collected goes a collection later.
		droppedKeys.request()
	}
}

// promptHost is the host in password and keyboard-interactive prompts.
func (a *authState) promptHost() string {
	if a.s.HostKeyAlias != "" {
		return a.s.HostKeyAlias
	}
	return a.s.HostName
}

// ask prompts; a Prompter error counts as an empty answer, as with
// OpenSSH's read_passphrase without a terminal, unless ctx is done.
func (a *authState) ask(prompt string, echo bool) (string, error) {
	if a.p == nil {
		return "", a.ctx.Err()
	}
	ans, err := a.p.Prompt(a.ctx, prompt, echo)
	if err != nil {
		if cerr := a.ctx.Err(); cerr != nil {
			a.abort = cerr
			return "", cerr
		}
		a.log.WithError(err).Debug("prompt failed; answering empty")
		return "", nil
	}
	return ans, nil
}

// askSecret prompts without echo for a secret the caller overwrites once
// used, like ask.
func (a *authState) askSecret(prompt string) ([]byte, error) {
	sp, ok := a.p.(SecretPrompter)
	if !ok {
		ans, err := a.ask(prompt, false)
		return []byte(ans), err
	}
	ans, err := sp.PromptSecret(a.ctx, prompt)
	if err != nil {
		if cerr := a.ctx.Err(); cerr != nil {
			a.abort = cerr
			return nil, cerr
		}
		a.log.WithError(err).Debug("prompt failed; answering empty")
		return nil, nil
	}
	return ans, nil
}

func (a *authState) enabled(method string) bool {
	if a.disabled[method] {
		return false
	}
	switch method {
	case "publickey":
		return a.s.PubkeyAuthentication
	case "password":
		return a.s.PasswordAuthentication && !a.s.BatchMode && !a.hk.noMITMMethod
	case "keyboard-interactive":
		return a.s.KbdInteractiveAuthentication && !a.s.BatchMode && !a.hk.noMITMMethod
	}
	return false // gssapi-with-mic, hostbased, none: never attempted
}

// callback is the ssh.ClientConfig AuthCallback.
func (a *authState) callback(c *ssh.ClientAuthContext) (ssh.AuthMethod, error) {
	if err := a.ctx.Err(); err != nil {
		a.abort = err
		return nil, err
	}
	if a.abort != nil {
		return nil, a.abort
	}
	list := strings.Join(c.AllowedMethods, ",")
	if list != a.supported {
		a.supported, a.pos, a.current = list, 0, ""
	}
	for {
		if a.current != "" && a.enabled(a.current) {
			m, err := a.attempt(a.current)
			if err != nil {
				a.abort = err
				return nil, err
			}
			if m != nil {
				return m, nil
			}
			a.disabled[a.current] = true
		}
		a.current = ""
		for a.pos < len(a.s.PreferredAuthentications) {
			cand := a.s.PreferredAuthentications[a.pos]
			a.pos++
			if slices.Contains(c.AllowedMethods, cand) {
				a.current = cand
				break
			}
		}
		if a.current == "" {
			a.denied = failure(a.s.LogLevel, ErrPermissionDenied,
				fatalLine(fmt.Sprintf("%s@%s: Permission denied (%s).", a.s.User, a.s.HostName, a.supported)))
			return nil, a.denied
		}
	}
}

// attempt returns the next try of method, or nil when it has none left.
func (a *authState) attempt(method string) (ssh.AuthMethod, error) {
	switch method {
	case "publickey":
		if !a.prepared {
			a.prepare()
		}
		for a.idNext < len(a.ids) {
			id := a.ids[a.idNext]
			a.idNext++
			if id.missing != nil {
				// At INFO for a file the user named (every configured
				// one here; the defaults are listed only where they exist).
				a.rep.line(lvlInfo, fmt.Sprintf("no such identity: %s: %s", id.name, strerror(id.missing)))
				continue
			}
			if id.pub == nil {
				// No public part on disk: OpenSSH loads the private key
				// (asking for its passphrase) before offering it.
				if _, err := a.signerFor(id); err != nil {
					if a.abort != nil {
						return nil, a.abort
					}
					continue
				}
			}
			a.log.WithField("key", id.name).Debug("offering public key")
			ls := &lazySigner{a: a, id: id}
			return ssh.PublicKeysCallback(func() ([]ssh.Signer, error) { return []ssh.Signer{ls}, nil }), nil
		}
		return nil, nil
	case "password":
		if a.pwAttempts >= a.s.NumberOfPasswordPrompts {
			return nil, nil
		}
		a.pwAttempts++
		n := a.pwAttempts
		return ssh.PasswordCallback(func() (string, error) {
			if n != 1 {
				a.rep.line(lvlError, "Permission denied, please try again.")
			}
			return a.ask(fmt.Sprintf("%.30s@%.128s's password: ", a.s.User, a.promptHost()), false)
		}), nil
	case "keyboard-interactive":
		if a.kbdAttempts >= a.s.NumberOfPasswordPrompts {
			return nil, nil
		}
		a.kbdAttempts++
		return ssh.KeyboardInteractive(a.challenge), nil
	}
	return nil, nil
}

// challenge answers keyboard-interactive questions like OpenSSH's
// input_userauth_info_req.
func (a *authState) challenge(name, instruction string, questions []string, echos []bool) ([]string, error) {
	if name != "" {
		a.rep.line(lvlInfo, name)
	}
	if instruction != "" {
		a.rep.line(lvlInfo, instruction)
	}
	answers := make([]string, len(questions))
	for i, q := range questions {
		ans, err := a.ask(fmt.Sprintf("(%s@%s) %s", a.s.User, a.promptHost(), q), echos[i])
		if err != nil {
			return nil, err
		}
		answers[i] = ans
	}
	return answers, nil
}

// prepare lists the identities in OpenSSH's pubkey_prepare order: the
// agent's copies of configured files (in agent order), then the agent's
// other keys (not with IdentitiesOnly), then the files the agent does not
// hold in configuration order. A key named with -i comes before the
// agent's others, so a full agent does not use up the server's
// MaxAuthTries before it.
func (a *authState) prepare() {
	a.prepared = true
	var files []*identity
	for _, f := range a.s.IdentityFiles {
		path := a.s.Env.abs(f)
		if _, err := os.Stat(path); err != nil {
			files = append(files, &identity{name: f, path: path, missing: err})
			continue
		}
		id := &identity{name: f, path: path, pub: loadPublic(path)}
		files = append(files, id)
		// FILE-cert.pub only where no CertificateFile is given
		// (load_public_identity_files); it signs with FILE.
		if len(a.s.CertificateFiles) == 0 {
			if cert := loadCert(path + "-cert.pub"); cert != nil {
				files = append(files, &identity{name: f, path: path, pub: cert})
			}
		}
	}
	// CertificateFile's user certificates come first, whoever holds
	// their key (see certKey); their own file is their path.
	var preferred, agentOnly []*identity
	for _, cf := range a.s.CertificateFiles {
		path := a.s.Env.abs(cf)
		if cert := loadCert(path); cert != nil && cert.CertType == ssh.UserCert {
			preferred = append(preferred, &identity{name: cf, path: path, pub: cert})
		}
	}
	for _, as := range a.agentSigners() {
		pub := as.PublicKey()
		found := false
		for i, id := range files {
			if keysEqual(id.pub, pub) {
				id.agent = as
				preferred = append(preferred, id)
				files = slices.Delete(files, i, i+1)
				found = true
				break
			}
		}
		if !found && !a.s.IdentitiesOnly {
			agentOnly = append(agentOnly, &identity{name: agentComment(as), pub: pub, agent: as})
		}
	}
	preferred = append(preferred, agentOnly...)
	for _, id := range append(preferred, files...) {
		// ssh-dss is not in OpenSSH 9.2's default PubkeyAcceptedAlgorithms.
		if id.pub != nil && id.pub.Type() == keyAlgoDSA {
			continue
		}
		a.ids = append(a.ids, id)
	}
}

// agentSigners returns the agent's keys, or none when there is no agent.
func (a *authState) agentSigners() []ssh.Signer {
	if a.s.AgentSock == "" {
		return nil
	}
	var d net.Dialer
	conn, err := d.DialContext(a.ctx, "unix", a.s.Env.abs(a.s.AgentSock))
	if err != nil {
		a.log.WithError(err).Debug("no ssh-agent")
		return nil
	}
	a.agentConn = conn
	signers, err := agent.NewClient(conn).Signers()
	if err != nil {
		a.log.WithError(err).Debug("ssh-agent: listing keys failed")
		return nil
	}
	return signers
}

func agentComment(s ssh.Signer) string {
	if k, ok := s.PublicKey().(*agent.Key); ok && k.Comment != "" {
		return k.Comment
	}
	return ssh.FingerprintSHA256(s.PublicKey())
}

// loadPublic reads the public half of an identity without its passphrase:
// the file itself when it is a public key, the public part of an OpenSSH
// format private key, or file.pub. nil when none is readable.
func loadPublic(path string) ssh.PublicKey {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	if k, _, _, _, err := ssh.ParseAuthorizedKey(data); err == nil {
		return k
	}
	defer clear(data) // an unencrypted key's private part
	var raw any
	offStack(func() { raw, err = ssh.ParseRawPrivateKey(data) })
	if err == nil {
		defer wipeKey(raw) // only its public part is needed here
		if s, err := ssh.NewSignerFromKey(raw); err == nil {
			return s.PublicKey()
		}
	}
	var pm *ssh.PassphraseMissingError
	if errors.As(err, &pm) && pm.PublicKey != nil {
		return pm.PublicKey
	}
	if data, err := os.ReadFile(path + ".pub"); err == nil {
		if k, _, _, _, err := ssh.ParseAuthorizedKey(data); err == nil {
			return k
		}
	}
	return nil
}

func loadCert(path string) *ssh.Certificate {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	k, _, _, _, err := ssh.ParseAuthorizedKey(data)
	if err != nil {
		return nil
	}
	c, _ := k.(*ssh.Certificate)
	return c
}

var errKeyUnusable = errors.New("identity unusable")

// signerFor returns the signer for id: the agent's, or the private key
// loaded like OpenSSH's load_identity_file (permission check, up to
// NumberOfPasswordPrompts passphrase prompts, none in BatchMode).
func (a *authState) signerFor(id *identity) (ssh.Signer, error) {
	if id.agent != nil {
		return id.agent, nil
	}
	if id.signer != nil {
		return id.signer, nil
	}
	if cert, ok := id.pub.(*ssh.Certificate); ok {
		if k := a.certKey(id, cert); k != nil {
			return a.signerFor(k)
		}
	}
	if id.missing != nil {
		a.rep.line(lvlInfo, fmt.Sprintf("no such identity: %s: %s", id.name, strerror(id.missing)))
		return nil, errKeyUnusable
	}
	if id.tried || id.path == "" {
		return nil, errKeyUnusable
	}
	id.tried = true
	if id.pub != nil && strings.HasPrefix(id.pub.Type(), "sk-") {
		// Authenticator-hosted keys need a SecurityKeyProvider.
		return nil, errKeyUnusable
	}
	if _, err := os.Stat(id.path); err != nil {
		return nil, errKeyUnusable
	}
	// sshkey_load_private_type: open, then the permission check on the
	// open file, then read; a failure other than ENOENT is said.
	f, err := os.Open(id.path)
	if err != nil {
		return nil, a.loadFailed(id, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, a.loadFailed(id, err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) == os.Getuid() && st.Mode().Perm()&0o077 != 0 {
		for _, l := range []string{
			"@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@",
			"@         WARNING: UNPROTECTED PRIVATE KEY FILE!          @",
			"@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@",
			fmt.Sprintf("Permissions 0%3.3o for '%s' are too open.", uint32(st.Mode().Perm()), id.name),
			"It is required that your private key files are NOT accessible by others.",
			"This private key will be ignored.",
			fmt.Sprintf("Load key \"%s\": bad permissions", id.name),
		} {
			a.rep.line(lvlError, l)
		}
		return nil, errKeyUnusable
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, a.loadFailed(id, err)
	}
	defer clear(data) // an unencrypted key's private part
	var raw any
	offStack(func() { raw, err = ssh.ParseRawPrivateKey(data) })
	var pm *ssh.PassphraseMissingError
	if errors.As(err, &pm) {
		if a.s.BatchMode {
			return nil, errKeyUnusable
		}
		prompt := fmt.Sprintf("Enter passphrase for key '%.100s': ", id.name)
		raw, err = nil, errKeyUnusable
		for i := 0; i < a.s.NumberOfPasswordPrompts; i++ {
			pass, perr := a.askSecret(prompt)
			if perr != nil {
				return nil, perr
			}
			if len(pass) == 0 {
				break
			}
			offStack(func() { raw, err = ssh.ParseRawPrivateKeyWithPassphrase(data, pass) })
			clear(pass)
			if err == nil {
				break
			}
			if !isWrongPassphrase(err) {
				a.rep.line(lvlError, fmt.Sprintf("Load key \"%s\": error in libcrypto", id.name))
				return nil, errKeyUnusable
			}
		}
		if err != nil {
			return nil, errKeyUnusable
		}
	} else if err != nil {
		a.rep.line(lvlError, fmt.Sprintf("Load key \"%s\": error in libcrypto", id.name))
		return nil, errKeyUnusable
	}
	signer, err := ssh.NewSignerFromKey(raw)
	if err != nil {
		wipeKey(raw)
		a.rep.line(lvlError, fmt.Sprintf("Load key \"%s\": invalid format", id.name))
		return nil, errKeyUnusable
	}
	id.signer, id.raw = signer, raw
	keyLoaded(raw)
	// Only a key the agent did not hold gets here (see id.agent above).
	a.addToAgent(id, raw, data)
	if id.pub == nil {
		id.pub = signer.PublicKey()
	}
	return signer, nil
}

// loadFailed says, as load_identity_file does, why id's file could not
// be read ("Is a directory", "Permission denied"), unless it is gone.
func (a *authState) loadFailed(id *identity, err error) error {
	if !errors.Is(err, fs.ErrNotExist) {
		a.rep.line(lvlError, fmt.Sprintf("Load key \"%s\": %s", id.name, strerror(err)))
	}
	return errKeyUnusable
}

// certKey is the identity whose private key signs for certificate id, as
// sign_and_send_pubkey picks it: one holding the certified key (a file
// or the agent), else a file whose public key could not be read and
// whose name is the certificate's less ".pub" or "-cert.pub"; nil when
// the certificate's own path is to be loaded.
func (a *authState) certKey(id *identity, cert *ssh.Certificate) *identity {
	for _, k := range a.ids {
		if k != id && keysEqual(k.pub, cert.Key) {
			return k
		}
	}
	for _, k := range a.ids {
		if k != id && k.pub == nil && idFilenameMatches(id.name, k.name) {
			return k
		}
	}
	return nil
}

// idFilenameMatches is sshconnect2.c's id_filename_matches: key is cert,
// or cert less ".pub" or "-cert.pub".
func idFilenameMatches(cert, key string) bool {
	if cert == key {
		return true
	}
	for _, suffix := range []string{".pub", "-cert.pub"} {
		if len(cert) > len(suffix) && strings.TrimSuffix(cert, suffix) == key && strings.HasSuffix(cert, suffix) {
			return true
		}
	}
	return false
}

// keyLoaded lets tests see the private keys loaded.
var keyLoaded = func(any) {}

// wipeKey overwrites what it can of a private key: an ed25519 key's
// bytes, the secret numbers of the others (the Go library's own
// precomputed copies are out of reach).
func wipeKey(k any) {
	switch k := k.(type) {
	case *ed25519.PrivateKey:
		clear(*k)
	case ed25519.PrivateKey:
		clear(k)
	case *rsa.PrivateKey:
		wipeInt(k.D)
		for _, p := range k.Primes {
			wipeInt(p)
		}
		wipeInt(k.Precomputed.Dp)
		wipeInt(k.Precomputed.Dq)
		wipeInt(k.Precomputed.Qinv)
	case *ecdsa.PrivateKey:
		//lint:ignore SA1019 the key is overwritten, not used again
		wipeInt(k.D)
	}
}

func wipeInt(i *big.Int) {
	if i != nil {
		clear(i.Bits())
		i.SetInt64(0)
	}
}

func isWrongPassphrase(err error) bool {
	return errors.Is(err, x509.IncorrectPasswordError)
}

// lazySigner offers id's public key and loads the private key (asking for
// its passphrase) only when the server accepts the key, as OpenSSH does.
type lazySigner struct {
	a  *authState
	id *identity
}

func (l *lazySigner) PublicKey() ssh.PublicKey { return l.id.pub }

func (l *lazySigner) Sign(r io.Reader, data []byte) (*ssh.Signature, error) {
	return l.SignWithAlgorithm(r, data, "")
}

func (l *lazySigner) SignWithAlgorithm(r io.Reader, data []byte, algo string) (*ssh.Signature, error) {
	s, err := l.a.signerFor(l.id)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", l.id.name, err)
	}
	var sig *ssh.Signature
	offStack(func() {
		if as, ok := s.(ssh.AlgorithmSigner); ok && algo != "" {
			sig, err = as.SignWithAlgorithm(r, data, algo)
		} else {
			sig, err = s.Sign(r, data)
		}
	})
	return sig, err
}

// offStack runs f, which handles a private key or passphrase, on a
// goroutine of its own whose stack it overwrites afterwards: the copies
// the crypto code leaves in dead stack frames are not garbage the
// collector clears, and a goroutine's stack memory is reused unwiped.
func offStack(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Grown first, so that f's frames are not left behind on a
		// smaller stack copied away while f runs.
		burnStack()
		f()
		burnStack()
	}()
	<-done
}

// burnStack overwrites burnSize bytes of stack below its caller's frame.
//
//go:noinline
func burnStack() {
	var b [burnSize]byte
	burnSink(b[:])
}

const burnSize = 64 << 10

//go:noinline
func burnSink(b []byte) { clear(b) }

var _ ssh.AlgorithmSigner = (*lazySigner)(nil)
