package sshclient

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// execServer is one SSH connection on loopback whose session records the
// requests it got (name, and "?" if a reply was wanted), in order.
type execServer struct {
	mu         sync.Mutex
	reqs       []string
	exitStatus *uint32 // nil: close without one
	refuse     string  // a request refused
	eow        bool    // eow@openssh.com sent before stdin is read
}

func (s *execServer) log() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reqs...)
}

func startExecServer(t *testing.T, s *execServer) *ssh.Client {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	cfg := &ssh.ServerConfig{NoClientAuth: true}
	cfg.AddHostKey(newTestSigner(t))
	go func() {
		sc, err := l.Accept()
		if err != nil {
			return
		}
		_, chans, reqs, err := ssh.NewServerConn(sc, cfg)
		if err != nil {
			return
		}
		go ssh.DiscardRequests(reqs)
		for nc := range chans {
			go s.session(nc)
		}
	}()
	cc, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	conn, chans, reqs, err := ssh.NewClientConn(cc, l.Addr().String(), &ssh.ClientConfig{User: "u", HostKeyCallback: ssh.InsecureIgnoreHostKey()})
	if err != nil {
		t.Fatal(err)
	}
	c := ssh.NewClient(conn, chans, reqs)
	t.Cleanup(func() { c.Close() })
	return c
}

// session: stdin comes back upper-cased on stdout once it ends, "err" on
// stderr, then the exit status (if any) and the close.
func (s *execServer) session(nc ssh.NewChannel) {
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	defer ch.Close()
	go func() {
		for r := range reqs {
			s.mu.Lock()
			s.reqs = append(s.reqs, r.Type+map[bool]string{true: "?", false: ""}[r.WantReply])
			s.mu.Unlock()
			if r.WantReply {
				_ = r.Reply(r.Type != s.refuse, nil)
			}
		}
	}()
	if s.eow {
		_, _ = ch.SendRequest("eow@openssh.com", false, nil)
	}
	in, _ := io.ReadAll(ch)
	_, _ = ch.Write(bytes.ToUpper(in))
	_, _ = io.WriteString(ch.Stderr(), "err")
	if s.exitStatus != nil {
		_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{*s.exitStatus}))
	}
}

// TestStartExec: env, pty-req and exec go out in that order with no reply
// wanted (StartExec sends them before it returns, so stdin follows them),
// and the exit status comes back as an ExitError.
func TestStartExec(t *testing.T) {
	status := uint32(3)
	srv := &execServer{exitStatus: &status}
	c := startExecServer(t, srv)
	e, err := StartExec(c, [][2]string{{"LANG", "C"}}, &PTY{Term: "xterm", Rows: 24, Cols: 80}, "cat")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = io.WriteString(e.Stdin(), "hello")
		_ = e.Stdin().Close()
	}()
	var errOut []byte
	errDone := make(chan struct{})
	go func() { errOut, _ = io.ReadAll(e.Stderr()); close(errDone) }()
	out, _ := io.ReadAll(e.Stdout())
	<-errDone
	werr := e.Wait()
	if string(out) != "HELLO" || string(errOut) != "err" {
		t.Errorf("stdout %q stderr %q, want HELLO, err", out, errOut)
	}
	var xe *ExitError
	if !errors.As(werr, &xe) || xe.Status != 3 || xe.Signal != "" {
		t.Errorf("Wait = %v, want exit status 3", werr)
	}
	if got := strings.Join(srv.log(), " "); got != "env pty-req exec" {
		t.Errorf("requests %q, want env, pty-req, exec, none wanting a reply", got)
	}
}

// TestStartExecNoStatus: a channel that closes without an exit status (a
// command that could not start) is an ExitError with status -1.
func TestStartExecNoStatus(t *testing.T) {
	c := startExecServer(t, &execServer{})
	e, err := StartExec(c, nil, nil, "true")
	if err != nil {
		t.Fatal(err)
	}
	_ = e.Stdin().Close()
	go func() { _, _ = io.Copy(io.Discard, e.Stderr()) }()
	_, _ = io.Copy(io.Discard, e.Stdout())
	var xe *ExitError
	if err := e.Wait(); !errors.As(err, &xe) || xe.Status != -1 {
		t.Errorf("Wait = %v, want ExitError with status -1", err)
	}
}

// TestExecAtEnd: a function given before the channel closes runs once it
// has, before Done closes; one given after runs at once.
func TestExecAtEnd(t *testing.T) {
	status := uint32(0)
	c := startExecServer(t, &execServer{exitStatus: &status})
	e, err := StartExec(c, nil, nil, "cat")
	if err != nil {
		t.Fatal(err)
	}
	var ran []string
	e.AtEnd(func() {
		select {
		case <-e.Done():
			t.Error("Done closed before the AtEnd function ran")
		default:
		}
		ran = append(ran, "before")
	})
	_ = e.Stdin().Close()
	go func() { _, _ = io.Copy(io.Discard, e.Stderr()) }()
	_, _ = io.Copy(io.Discard, e.Stdout())
	<-e.Done()
	if len(ran) != 1 {
		t.Fatalf("AtEnd given before the end ran %d times by Done", len(ran))
	}
	e.AtEnd(func() { ran = append(ran, "after") })
	if strings.Join(ran, " ") != "before after" {
		t.Errorf("ran %q, want before, then after at once", ran)
	}
	if err := e.Wait(); err != nil {
		t.Errorf("Wait = %v", err)
	}
}

// TestOpenSession: a pty-req and an exec wait for their replies, as
// x/crypto's Session, and eow@openssh.com shows on EOW.
func TestOpenSession(t *testing.T) {
	srv := &execServer{eow: true}
	c := startExecServer(t, srv)
	e, err := OpenSession(c)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.RequestPty("xterm", 24, 80, ssh.TerminalModes{ssh.ECHO: 0}); err != nil {
		t.Fatal(err)
	}
	if err := e.Start("cat"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.EOW():
	case <-time.After(10 * time.Second):
		t.Fatal("no EOW after the server's eow@openssh.com")
	}
	if got := strings.Join(srv.log(), " "); got != "pty-req? exec?" {
		t.Errorf("requests %q, want pty-req and exec, each wanting a reply", got)
	}
}

// TestOpenSessionRefused: a refused pty-req or exec is an error.
func TestOpenSessionRefused(t *testing.T) {
	for _, refused := range []string{"pty-req", "shell"} {
		c := startExecServer(t, &execServer{refuse: refused})
		e, err := OpenSession(c)
		if err != nil {
			t.Fatal(err)
		}
		err = e.RequestPty("xterm", 24, 80, nil)
		if refused == "pty-req" {
			if err == nil {
				t.Errorf("a refused pty-req gave no error")
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(""); err == nil {
			t.Errorf("a refused shell gave no error")
		}
		e.Close()
	}
}

// TestRealClientVersion: the version string is what ssh -V names, where
// an ssh answers.
func TestRealClientVersion(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ script, want string }{
		{"echo 'OpenSSH_9.2p1 Debian-2+deb12u10, OpenSSL 3.0.19 27 Jan 2026' >&2", "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u10"},
		{"echo 'something else' >&2", ""},
		{"exit 1", ""},
	} {
		fake := filepath.Join(dir, "ssh")
		if err := os.WriteFile(fake, []byte("#!/bin/sh\n"+tc.script+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv("ANSIBLE_BRIDGE_REAL_SSH", fake)
		if got := realClientVersion(); got != tc.want {
			t.Errorf("with %q: %q, want %q", tc.script, got, tc.want)
		}
	}
}
