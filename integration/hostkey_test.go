package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// hostKeyCase is a known_hosts file and the options of one ssh run.
type hostKeyCase struct {
	name  string
	known string // known_hosts content; KEY and WRONG stand for the keys
	opts  []string
}

var hostKeyCases = []hostKeyCase{
	{"known", "[127.0.0.1]:PORT KEY\n", []string{"-o", "StrictHostKeyChecking=yes"}},
	{"known without port", "127.0.0.1 KEY\n", []string{"-o", "StrictHostKeyChecking=yes"}},
	{"unknown, strict", "", []string{"-o", "StrictHostKeyChecking=yes"}},
	{"unknown, ask without a terminal", "", nil},
	{"unknown, accept-new", "", []string{"-o", "StrictHostKeyChecking=accept-new"}},
	{"unknown, accept-new, names in clear", "", []string{"-o", "StrictHostKeyChecking=accept-new", "-o", "HashKnownHosts=no"}},
	{"unknown, no, LogLevel=ERROR", "", []string{"-o", "StrictHostKeyChecking=no", "-o", "LogLevel=ERROR"}},
	{"changed, strict", "[127.0.0.1]:PORT WRONG\n", []string{"-o", "StrictHostKeyChecking=yes"}},
	{"changed, strict, -q", "[127.0.0.1]:PORT WRONG\n", []string{"-o", "StrictHostKeyChecking=yes", "-q"}},
	{"changed, accept-new", "[127.0.0.1]:PORT WRONG\n", []string{"-o", "StrictHostKeyChecking=accept-new"}},
	{"changed, no", "[127.0.0.1]:PORT WRONG\n", []string{"-o", "StrictHostKeyChecking=no"}},
	{"other port's entry is wrong", "127.0.0.1 WRONG\n", []string{"-o", "StrictHostKeyChecking=yes"}},
	{"revoked", "@revoked * KEY\n", []string{"-o", "StrictHostKeyChecking=yes"}},
	{"revoked, no", "@revoked * KEY\n", []string{"-o", "StrictHostKeyChecking=no"}},
	{"alias", "myalias KEY\n", []string{"-o", "StrictHostKeyChecking=yes", "-o", "HostKeyAlias=myalias"}},
	// ssh looks a numeric address up as getnameinfo writes it.
	{"known, HostName 127.1", "[127.0.0.1]:PORT KEY\n", []string{"-o", "StrictHostKeyChecking=yes", "-o", "HostName=127.1"}},
	{"known as 127.1 only", "[127.1]:PORT KEY\n", []string{"-o", "StrictHostKeyChecking=yes", "-o", "HostName=127.1"}},
	{"known, a wrong key for 127.1", "[127.0.0.1]:PORT KEY\n[127.1]:PORT WRONG\n", []string{"-o", "StrictHostKeyChecking=yes", "-o", "HostName=127.1"}},
	{"unknown, accept-new, HostName 0x7f000001", "", []string{"-o", "StrictHostKeyChecking=accept-new", "-o", "HashKnownHosts=no", "-o", "HostName=0x7f000001"}},
	// ssh takes any key for a loopback address, unless HostKeyAlias.
	{"unknown, strict, NoHostAuthenticationForLocalhost", "", []string{"-o", "StrictHostKeyChecking=yes", "-o", "NoHostAuthenticationForLocalhost=yes"}},
	{"changed, strict, NoHostAuthenticationForLocalhost", "[127.0.0.1]:PORT WRONG\n", []string{"-o", "StrictHostKeyChecking=yes", "-o", "NoHostAuthenticationForLocalhost=yes"}},
	{"alias changed, strict, NoHostAuthenticationForLocalhost", "myalias WRONG\n", []string{"-o", "StrictHostKeyChecking=yes", "-o", "NoHostAuthenticationForLocalhost=yes", "-o", "HostKeyAlias=myalias"}},
	// UpdateHostKeys: a key the server no longer has leaves the file
	// (rewritten 0600, the old one kept as .old); off by default with a
	// UserKnownHostsFile of one's own; ask prompts, so in BatchMode ssh
	// does nothing (and the shim falls back).
	{"known and a stale key", "[127.0.0.1]:PORT KEY\n[127.0.0.1]:PORT WRONG\n", []string{"-o", "StrictHostKeyChecking=yes"}},
	{"known and a stale key, UpdateHostKeys=yes", "# mine\n[127.0.0.1]:PORT WRONG\n[127.0.0.1]:PORT KEY\n", []string{"-o", "StrictHostKeyChecking=yes", "-o", "UpdateHostKeys=yes"}},
	{"known and a stale key also known by another name, UpdateHostKeys=yes", "other WRONG\n[127.0.0.1]:PORT WRONG\n[127.0.0.1]:PORT KEY\n", []string{"-o", "StrictHostKeyChecking=yes", "-o", "UpdateHostKeys=yes"}},
	{"known and a stale key, UpdateHostKeys=ask", "[127.0.0.1]:PORT KEY\n[127.0.0.1]:PORT WRONG\n", []string{"-o", "StrictHostKeyChecking=yes", "-o", "UpdateHostKeys=ask"}},
	{"known and a stale key on a wildcard line, UpdateHostKeys=yes", "[127.0.0.1]:PORT KEY\n[127.0.0.*]:PORT WRONG\n", []string{"-o", "StrictHostKeyChecking=yes", "-o", "UpdateHostKeys=yes"}},
	{"unknown, accept-new, UpdateHostKeys=yes", "127.0.0.2 WRONG\n", []string{"-o", "StrictHostKeyChecking=accept-new", "-o", "UpdateHostKeys=yes"}},
	// Without a user known_hosts file ssh can record no key: it refuses
	// an unknown host whatever StrictHostKeyChecking says. KNOWN_HOSTS in
	// an option is the case's file.
	{"unknown, no files, no", "", []string{"-o", "UserKnownHostsFile=none", "-o", "GlobalKnownHostsFile=none", "-o", "StrictHostKeyChecking=no"}},
	{"unknown, no files, accept-new", "", []string{"-o", "UserKnownHostsFile=none", "-o", "GlobalKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=accept-new"}},
	{"unknown, no files, strict", "", []string{"-o", "UserKnownHostsFile=none", "-o", "GlobalKnownHostsFile=none", "-o", "StrictHostKeyChecking=yes"}},
	{"known in the global file only", "[127.0.0.1]:PORT KEY\n", []string{"-o", "UserKnownHostsFile=none", "-o", "GlobalKnownHostsFile=KNOWN_HOSTS", "-o", "StrictHostKeyChecking=accept-new"}},
	{"changed in the global file only, no", "[127.0.0.1]:PORT WRONG\n", []string{"-o", "UserKnownHostsFile=none", "-o", "GlobalKnownHostsFile=KNOWN_HOSTS", "-o", "StrictHostKeyChecking=no"}},
}

// TestHostKeyLikeOpenSSH runs ssh through the shim and through OpenSSH
// with the same known_hosts content and options, and wants the same exit
// status, output, messages and known_hosts file afterwards. Each side has
// a ControlPath of its own. "cold": no master, so ssh (and the daemon)
// connects and checks the key; "warm": a ControlPersist master made with
// the right key known is up, and ssh multiplexes over it without
// checking anything, as the daemon must too.
func TestHostKeyLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	key := hostPublicKey(t, filepath.Join(suite.lab.Dir, "ssh_host_ed25519_key.pub"))
	wrong := hostPublicKey(t, suite.lab.WrongKey+".pub")
	dir := t.TempDir()
	sides := []string{suite.realSSH, filepath.Join(suite.shims, "ssh")}
	for _, warm := range []bool{false, true} {
		for n, tc := range hostKeyCases {
			name := "cold/" + tc.name
			if warm {
				name = "warm/" + tc.name
			}
			t.Run(name, func(t *testing.T) {
				d := newPrivateDaemon(t)
				content := strings.NewReplacer("PORT", suite.lab.Port, "WRONG", wrong, "KEY", key).Replace(tc.known)
				mux := func(i int) []string {
					cp := filepath.Join(dir, fmt.Sprintf("%s-%d-%t", []string{"real", "shim"}[i], n, warm))
					return append([]string{"-o", "ControlMaster=auto", "-o", "ControlPath=" + cp}, tc.opts...)
				}
				if warm {
					// The same options with the right key known, kept
					// up as a master for the run below.
					trusted := "[127.0.0.1]:" + suite.lab.Port + " " + key + "\n127.0.0.1 " + key + "\nmyalias " + key + "\n"
					for i, side := range sides {
						kh := filepath.Join(dir, "trusted")
						writeKnownHosts(t, kh, trusted)
						opts := append([]string{"-o", "ControlPersist=60s"}, withoutKnownHostsFiles(mux(i))...)
						if r := sshRun(t, side, kh, opts, d.env()); r.rc != 0 {
							t.Fatalf("%s: warming up with the right key: rc %d\n%s", side, r.rc, r.stderr)
						}
						t.Cleanup(func() { sshRun(t, side, kh, append([]string{"-O", "exit"}, mux(i)...), d.env()) })
					}
				}
				var runs [2]hostKeyRun
				for i, side := range sides {
					kh := filepath.Join(dir, []string{"real", "shim"}[i])
					writeKnownHosts(t, kh, content)
					runs[i] = sshRun(t, side, kh, mux(i), d.env())
					runs[i].known = knownHostsShape(t, kh)
					if old, err := os.Stat(kh + ".old"); err == nil {
						fi, _ := os.Stat(kh)
						runs[i].known += fmt.Sprintf("(mode %v, .old %v)\n", fi.Mode(), old.Mode()) + knownHostsShape(t, kh+".old")
					}
				}
				want, got := runs[0], runs[1]
				if got.rc != want.rc || got.stdout != want.stdout || got.stderr != want.stderr {
					t.Errorf("through the shim: rc %d, stdout %q, stderr:\n%s\nwith OpenSSH: rc %d, stdout %q, stderr:\n%s",
						got.rc, got.stdout, got.stderr, want.rc, want.stdout, want.stderr)
				}
				if got.known != want.known {
					t.Errorf("known_hosts afterwards through the shim:\n%s\nwith OpenSSH:\n%s", got.known, want.known)
				}
			})
		}
	}
}

// TestKnownHostsModeLikeOpenSSH: the modes of a known_hosts file ssh
// creates (accept-new, no file yet) and of the one UpdateHostKeys
// rewrites (a stale key dropped), and of its .old, under the caller's
// umask, through the shim and through OpenSSH.
func TestKnownHostsModeLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	key := hostPublicKey(t, filepath.Join(suite.lab.Dir, "ssh_host_ed25519_key.pub"))
	wrong := hostPublicKey(t, suite.lab.WrongKey+".pub")
	stale := "[127.0.0.1]:" + suite.lab.Port + " " + wrong + "\n[127.0.0.1]:" + suite.lab.Port + " " + key + "\n"
	d := newPrivateDaemon(t)
	dir := t.TempDir()
	sides := []string{suite.realSSH, filepath.Join(suite.shims, "ssh")}
	for _, umask := range []string{"000", "027", "077"} {
		for _, tc := range []struct{ name, known, opt string }{
			{"created", "", "StrictHostKeyChecking=accept-new"},
			{"rewritten", stale, "UpdateHostKeys=yes"},
		} {
			var modes [2]string
			for i, side := range sides {
				kh := filepath.Join(dir, fmt.Sprintf("%s-%s-%d", tc.name, umask, i))
				if tc.known != "" {
					writeKnownHosts(t, kh, tc.known)
				}
				cmd := exec.Command("/bin/sh", "-c", `umask "$0" && exec "$@"`, umask, side,
					"-o", "BatchMode=yes", "-i", suite.lab.Key, "-p", suite.lab.Port,
					"-o", "UserKnownHostsFile="+kh, "-o", "ControlMaster=auto", "-o", "ControlPath="+kh+".cp",
					"-o", tc.opt, suite.lab.User+"@127.0.0.1", "true")
				if o := runOwnSession(t, cmd, d.env()); o.rc != 0 {
					t.Fatalf("%s %s, umask %s: rc %d\n%s", side, tc.name, umask, o.rc, o.stderr)
				}
				for _, f := range []string{kh, kh + ".old"} {
					if fi, err := os.Stat(f); err == nil {
						modes[i] += fmt.Sprintf("%s %v; ", filepath.Ext(f), fi.Mode())
					}
				}
			}
			if modes[1] != modes[0] {
				t.Errorf("known_hosts %s under umask %s: through the shim %s with OpenSSH %s", tc.name, umask, modes[1], modes[0])
			}
		}
	}
}

// withoutKnownHostsFiles drops the "-o", "...KnownHostsFile=..." pairs
// of opts (a warm-up's files are the trusted ones).
func withoutKnownHostsFiles(opts []string) []string {
	var out []string
	for i := 0; i < len(opts); i++ {
		if opts[i] == "-o" && i+1 < len(opts) && strings.Contains(opts[i+1], "KnownHostsFile=") {
			i++
			continue
		}
		out = append(out, opts[i])
	}
	return out
}

type hostKeyRun struct {
	rc                    int
	stdout, stderr, known string
}

// sshRun runs `ssh -o UserKnownHostsFile=kh OPTS abtest@127.0.0.1 echo
// hi` (OPTS' own UserKnownHostsFile instead, if any; KNOWN_HOSTS in OPTS
// is kh) without a terminal (its own session, stdin /dev/null), the file
// name in the messages replaced by KNOWN_HOSTS.
func sshRun(t *testing.T, ssh, kh string, opts, env []string) hostKeyRun {
	t.Helper()
	return sshRunPort(t, ssh, kh, suite.lab.Port, opts, env)
}

// sshRunPort is sshRun to the sshd on 127.0.0.1:port.
func sshRunPort(t *testing.T, ssh, kh, port string, opts, env []string) hostKeyRun {
	t.Helper()
	args := []string{"-o", "BatchMode=yes", "-i", suite.lab.Key, "-p", port}
	if !slices.ContainsFunc(opts, func(o string) bool { return strings.HasPrefix(o, "UserKnownHostsFile=") }) {
		args = append(args, "-o", "UserKnownHostsFile="+kh)
	}
	for _, o := range opts {
		args = append(args, strings.ReplaceAll(o, "KNOWN_HOSTS", kh))
	}
	args = append(args, suite.lab.User+"@127.0.0.1", "echo", "hi")
	o := runOwnSession(t, exec.Command(ssh, args...), env)
	return hostKeyRun{rc: o.rc, stdout: o.stdout, stderr: strings.ReplaceAll(o.stderr, kh, "KNOWN_HOSTS")}
}

// runOwnSession runs cmd in a session of its own (no terminal, stdin
// /dev/null), with the suite's HOME and PATH without the shims, and env.
func runOwnSession(t *testing.T, cmd *exec.Cmd, env []string) sshOutcome {
	t.Helper()
	cmd.Env = append(cleanEnv(os.Environ()), append([]string{"HOME=" + suite.home, "PATH=" + suite.basePATH}, env...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	rc := 0
	if ee, ok := err.(*exec.ExitError); ok {
		rc = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", cmd.Path, err)
	}
	return sshOutcome{rc: rc, stdout: stdout.String(), stderr: stderr.String()}
}

func hostPublicKey(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		t.Fatalf("%s: not a public key", path)
	}
	return f[0] + " " + f[1]
}

func writeKnownHosts(t *testing.T, path, content string) {
	t.Helper()
	// A new 0644 file, as UpdateHostKeys' rewrite leaves 0600 and a .old.
	_ = os.Remove(path)
	_ = os.Remove(path + ".old")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// knownHostsShape is the file with each hashed host name (random salt)
// written as HASHED.
func knownHostsShape(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "|1|") {
			_, rest, _ := strings.Cut(l, " ")
			lines[i] = "HASHED " + rest
		}
	}
	return strings.Join(lines, "")
}

// hostCertCases are known_hosts contents for a server whose host key is
// certified by CA for the principal 127.0.0.1, on a port other than 22.
var hostCertCases = []hostKeyCase{
	{"CA for any host", "@cert-authority * CA\n", nil},
	// @revoked covers a certificate's CA and its key.
	{"revoked CA", "@cert-authority * CA\n@revoked * CA\n", nil},
	{"revoked host key", "@cert-authority * CA\n@revoked * KEY\n", nil},
	{"revoked CA, plain key known", "@revoked * CA\n[127.0.0.1]:PORT KEY\n", nil},
	{"revoked CA, no", "@cert-authority * CA\n@revoked * CA\n", []string{"-o", "StrictHostKeyChecking=no"}},
	// Refused certificates: "Certificate invalid: ...", then the plain key.
	{"HostKeyAlias not a principal", "@cert-authority * CA\n", []string{"-o", "HostKeyAlias=notaprincipal"}},
	{"HostKeyAlias not a principal, plain key known", "@cert-authority * CA\nnotaprincipal KEY\n", []string{"-o", "HostKeyAlias=notaprincipal"}},
	// No CA for [127.0.0.1]:PORT: ssh looks again for 127.0.0.1.
	{"CA for a pattern without the port", "@cert-authority 127.0.0.* CA\n", nil},
	{"CA for the bare address", "@cert-authority 127.0.0.1 CA\n", nil},
	{"CA for all but [host]:port", "@cert-authority *,![127.0.0.1]:PORT CA\n", nil},
	{"CA for the bare address, accept-new", "@cert-authority 127.0.0.1 CA\n", []string{"-o", "StrictHostKeyChecking=accept-new"}},
	{"CA for the bare address, revoked there", "@cert-authority 127.0.0.1 CA\n@revoked 127.0.0.1 CA\n", nil},
	{"key revoked for the bare address", "@revoked 127.0.0.1 KEY\n", nil},
	{"no CA, accept-new", "@cert-authority elsewhere CA\n", []string{"-o", "StrictHostKeyChecking=accept-new"}},
	{"CA in the global file only", "@cert-authority * CA\n", []string{"-o", "UserKnownHostsFile=none", "-o", "GlobalKnownHostsFile=KNOWN_HOSTS"}},
}

// expiredCertCases are for a server whose certificate has expired.
var expiredCertCases = []hostKeyCase{
	{"expired", "@cert-authority * CA\n", nil},
	{"expired, plain key known", "@cert-authority * CA\n[127.0.0.1]:PORT KEY\n", nil},
	{"expired, accept-new", "@cert-authority * CA\n", []string{"-o", "StrictHostKeyChecking=accept-new"}},
	{"expired, CA for the bare address, accept-new", "@cert-authority 127.0.0.1 CA\n", []string{"-o", "StrictHostKeyChecking=accept-new"}},
}

// TestHostCertificateLikeOpenSSH runs ssh through the shim and through
// OpenSSH against an sshd of the test's own with a HostCertificate, with
// the same known_hosts content and options (StrictHostKeyChecking yes
// unless the case says otherwise), and wants the same exit status,
// output, messages and known_hosts file afterwards.
func TestHostCertificateLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	if os.Getuid() != 0 {
		t.Skip("needs root: starts an sshd that logs the lab's user in")
	}
	dir := t.TempDir()
	keygen := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ssh-keygen", append([]string{"-q"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen %v: %v\n%s", args, err, out)
		}
	}
	ca := filepath.Join(dir, "ca")
	keygen("-t", "ed25519", "-N", "", "-f", ca)
	caKey := hostPublicKey(t, ca+".pub")
	sides := []string{suite.realSSH, filepath.Join(suite.shims, "ssh")}
	n := 0
	for _, set := range []struct {
		name     string
		validity string
		cases    []hostKeyCase
	}{{"valid", "-1d:+1d", hostCertCases}, {"expired", "-2d:-1d", expiredCertCases}} {
		hostKey := filepath.Join(dir, set.name)
		keygen("-t", "ed25519", "-N", "", "-f", hostKey)
		keygen("-s", ca, "-I", "h", "-h", "-n", "127.0.0.1", "-V", set.validity, hostKey+".pub")
		port := startCertSSHD(t, hostKey)
		key := hostPublicKey(t, hostKey+".pub")
		for _, tc := range set.cases {
			n++
			checkHostCert(t, tc, n, dir, port, caKey, key, sides)
		}
	}
}

// checkHostCert runs one case of TestHostCertificateLikeOpenSSH.
func checkHostCert(t *testing.T, tc hostKeyCase, n int, dir, port, caKey, key string, sides []string) {
	t.Run(tc.name, func(t *testing.T) {
		d := newPrivateDaemon(t)
		content := strings.NewReplacer("PORT", port, "CA", caKey, "KEY", key).Replace(tc.known)
		var runs [2]hostKeyRun
		for i, side := range sides {
			kh := filepath.Join(dir, []string{"real", "shim"}[i])
			writeKnownHosts(t, kh, content)
			cp := filepath.Join(dir, fmt.Sprintf("%s-%d", []string{"real", "shim"}[i], n))
			opts := append([]string{"-o", "ControlMaster=auto", "-o", "ControlPath=" + cp, "-o", "GlobalKnownHostsFile=/dev/null",
				"-o", "HashKnownHosts=no", "-o", "UpdateHostKeys=no"}, tc.opts...)
			opts = append(opts, "-o", "StrictHostKeyChecking=yes")
			runs[i] = sshRunPort(t, side, kh, port, opts, d.env())
			runs[i].known = knownHostsShape(t, kh)
			sshRunPort(t, side, kh, port, []string{"-O", "exit", "-o", "ControlPath=" + cp}, d.env())
		}
		want, got := runs[0], runs[1]
		if got.rc != want.rc || got.stdout != want.stdout || got.stderr != want.stderr {
			t.Errorf("through the shim: rc %d, stdout %q, stderr:\n%s\nwith OpenSSH: rc %d, stdout %q, stderr:\n%s",
				got.rc, got.stdout, got.stderr, want.rc, want.stdout, want.stderr)
		}
		if got.known != want.known {
			t.Errorf("known_hosts afterwards through the shim:\n%s\nwith OpenSSH:\n%s", got.known, want.known)
		}
	})
}

// startCertSSHD starts an sshd on a free port of 127.0.0.1 with hostKey
// and its certificate (hostKey-cert.pub), letting only the lab's user in
// by key, until t ends; it returns once sshd says it listens.
func startCertSSHD(t *testing.T, hostKey string) string {
	t.Helper()
	return startSSHD(t, hostKey, fmt.Sprintf("HostCertificate %s-cert.pub\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n", hostKey))
}

// startSSHD starts an sshd on a free port of 127.0.0.1 with hostKey,
// letting only the lab's user in, with the lines of extra added to its
// configuration, until t ends; it returns the port once sshd says it
// listens.
func startSSHD(t *testing.T, hostKey, extra string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sshd_config")
	conf := fmt.Sprintf("Port %s\nListenAddress 127.0.0.1\nHostKey %s\nPidFile %s\nAllowUsers %s\nUsePAM yes\n%s",
		port, hostKey, filepath.Join(dir, "sshd.pid"), suite.lab.User, extra)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", cfg)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "Server listening on 127.0.0.1 port "+port) {
			go func() { _, _ = io.Copy(io.Discard, stderr) }()
			return port
		}
		t.Logf("sshd: %s", sc.Text())
	}
	t.Fatalf("sshd on port %s ended before listening", port)
	return ""
}
