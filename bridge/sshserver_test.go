package bridge

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// testServer is an in-process SSH server on 127.0.0.1:0 that runs exec
// requests with /bin/sh and serves the sftp subsystem from the local
// filesystem. It counts TCP connections and refuses channels beyond
// maxSessions per connection, like OpenSSH's MaxSessions.
type testServer struct {
	addr        string
	hostKey     ssh.Signer
	clientKey   ssh.Signer
	maxSessions int
	conns       atomic.Int32
	ptys        atomic.Int32
	refusePTY   atomic.Bool  // answer pty-req with failure, as sshd for a no-pty key
	ptyRefused  atomic.Int32 // pty-reqs refused
	envReplies  atomic.Int32 // env requests that wanted a reply (ssh wants none)
	execs       atomic.Int32
	signals     atomic.Int32 // signal requests on exec channels
	closed      atomic.Int32 // exec channels whose requests ended: closed
	// sftpRefused refuses the sftp subsystem, as sshd without
	// `Subsystem sftp`; sftpNoise is printed before sftp-server starts,
	// as by a login shell's rc file. sftpAsked counts the requests.
	sftpRefused atomic.Bool
	sftpNoise   atomic.Value // string
	sftpAsked   atomic.Int32
	// sftpReadOnly serves sftp read-only, as `internal-sftp -R`;
	// loginUmask, if set, is the umask the login shell's rc file gives
	// commands (not sftp-server here, as under internal-sftp).
	sftpReadOnly atomic.Bool
	loginUmask   atomic.Value // string, e.g. "077"
	// dropOnExec closes the TCP connection at an exec request, without
	// a reply: sshd's child once its monitor was killed.
	dropOnExec atomic.Bool

	// hang holds the channel opens and global requests that come while
	// set unanswered, as a
	// hung sshd (SIGSTOP); holdSubsystem holds subsystem requests so; held
	// counts them. They stay held.
	hang, holdSubsystem atomic.Bool
	held                atomic.Int32

	mu   sync.Mutex
	live []net.Conn
}

// dropAll cuts every TCP connection, as a rebooted target or a NAT
// timeout would.
func (ts *testServer) dropAll() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, c := range ts.live {
		c.Close()
	}
	ts.live = nil
}

func newTestServer(t *testing.T, maxSessions int) *testServer {
	t.Helper()
	_, hk, _ := ed25519.GenerateKey(rand.Reader)
	hostKey, err := ssh.NewSignerFromKey(hk)
	if err != nil {
		t.Fatal(err)
	}
	_, ck, _ := ed25519.GenerateKey(rand.Reader)
	clientKey, _ := ssh.NewSignerFromKey(ck)
	ts := &testServer{hostKey: hostKey, clientKey: clientKey, maxSessions: maxSessions}
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if string(k.Marshal()) == string(clientKey.PublicKey().Marshal()) {
				return nil, nil
			}
			return nil, errors.New("unknown key")
		},
	}
	cfg.AddHostKey(hostKey)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ts.addr = ln.Addr().String()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			ts.conns.Add(1)
			ts.mu.Lock()
			ts.live = append(ts.live, c)
			ts.mu.Unlock()
			go ts.serve(c, cfg)
		}
	}()
	return ts
}

func (ts *testServer) serve(c net.Conn, cfg *ssh.ServerConfig) {
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		c.Close()
		return
	}
	defer sc.Close()
	go func() {
		for req := range reqs {
			if ts.hang.Load() {
				ts.held.Add(1) // unanswered, as by a hung sshd
				continue
			}
			if req.WantReply {
				_ = req.Reply(false, nil)
			}
		}
	}()
	var open atomic.Int32
	for nc := range chans {
		if ts.hang.Load() {
			ts.held.Add(1)
			continue
		}
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "no")
			continue
		}
		if ts.maxSessions > 0 && int(open.Load()) >= ts.maxSessions {
			nc.Reject(ssh.Prohibited, "open failed")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		open.Add(1)
		go func() {
			defer open.Add(-1)
			ts.session(c, ch, creqs)
		}()
	}
}

func (ts *testServer) session(conn net.Conn, ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	var env []string
	for req := range reqs {
		switch req.Type {
		case "env":
			var kv struct{ K, V string }
			_ = ssh.Unmarshal(req.Payload, &kv)
			env = append(env, kv.K+"="+kv.V)
			if req.WantReply {
				ts.envReplies.Add(1)
			}
			req.Reply(true, nil)
		case "pty-req":
			if ts.refusePTY.Load() {
				ts.ptyRefused.Add(1)
				req.Reply(false, nil)
				continue
			}
			ts.ptys.Add(1)
			req.Reply(true, nil)
		case "exec":
			if ts.dropOnExec.Load() {
				conn.Close()
				return
			}
			var cmd struct{ C string }
			_ = ssh.Unmarshal(req.Payload, &cmd)
			req.Reply(true, nil)
			ts.execs.Add(1)
			go func() {
				for r := range reqs {
					if r.Type == "signal" {
						ts.signals.Add(1)
					}
					if r.WantReply {
						_ = r.Reply(false, nil)
					}
				}
				ts.closed.Add(1)
			}()
			ts.run(ch, cmd.C, env)
			return
		case "subsystem":
			if ts.holdSubsystem.Load() {
				ts.held.Add(1)
				continue
			}
			var name struct{ N string }
			_ = ssh.Unmarshal(req.Payload, &name)
			if name.N == "sftp" {
				ts.sftpAsked.Add(1)
			}
			if name.N != "sftp" || ts.sftpRefused.Load() {
				req.Reply(false, nil)
				continue
			}
			req.Reply(true, nil)
			go ssh.DiscardRequests(reqs)
			if noise, _ := ts.sftpNoise.Load().(string); noise != "" {
				_, _ = io.WriteString(ch, noise)
			}
			var opts []sftp.ServerOption
			if ts.sftpReadOnly.Load() {
				opts = append(opts, sftp.ReadOnly())
			}
			srv, err := sftp.NewServer(ch, opts...)
			if err == nil {
				_ = srv.Serve()
			}
			return
		default:
			req.Reply(false, nil)
		}
	}
}

func (ts *testServer) run(ch ssh.Channel, command string, env []string) {
	if u, _ := ts.loginUmask.Load().(string); u != "" {
		command = "umask " + u + "; " + command
	}
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	// As sshd, the exit status goes out when the command exits, whether
	// or not the client has closed its stdin.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return
	}
	go func() {
		_, _ = io.Copy(stdin, ch)
		stdin.Close()
	}()
	cmd.Stdout = ch
	cmd.Stderr = ch.Stderr()
	status := uint32(0)
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				_, _ = ch.SendRequest("exit-signal", false, ssh.Marshal(struct {
					Sig  string
					Core bool
					Msg  string
					Lang string
				}{"KILL", false, "", ""}))
				return
			}
			status = uint32(ee.ExitCode())
		} else {
			status = 127
		}
	}
	_, _ = ch.SendRequest("exit-status", false, binary.BigEndian.AppendUint32(nil, status))
}
