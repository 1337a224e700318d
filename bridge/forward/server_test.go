package forward

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
	"golang.org/x/crypto/ssh"
)

// mockServer is an in-process SSH server on 127.0.0.1:0 with OpenSSH's
// forwarding requests: direct-tcpip, direct-streamlocal, tcpip-forward and
// streamlocal-forward (echoing the bind host as sent) and their cancels.
type mockServer struct {
	t           *testing.T
	addr        string
	denyForward bool

	mu      sync.Mutex
	globals []*ssh.Request // every global request, in order
	opens   []openRecord   // every direct-* channel
	fwds    map[string]net.Listener
	// refusals are the client's refusals of forwarded channels: reason
	// and message.
	refusals []string
	changed  chan struct{} // closed and replaced whenever the above change
}

type openRecord struct {
	kind, host string
	port       uint32
	origHost   string
	origPort   uint32
}

func startMock(t *testing.T) *mockServer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{NoClientAuth: true}
	cfg.AddHostKey(signer)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &mockServer{t: t, addr: ln.Addr().String(), fwds: map[string]net.Listener{}, changed: make(chan struct{})}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		m.mu.Lock()
		for _, l := range m.fwds {
			l.Close()
		}
		m.mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { m.serve(c, cfg, &wg) })
		}
	})
	return m
}

// dial connects a client and closes it when the test ends.
func (m *mockServer) dial(t *testing.T) *ssh.Client {
	t.Helper()
	c, err := ssh.Dial("tcp", m.addr, &ssh.ClientConfig{User: "u", HostKeyCallback: ssh.InsecureIgnoreHostKey()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (m *mockServer) notify() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// waitFor blocks until cond (called under m.mu) holds.
func (m *mockServer) waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for {
		m.mu.Lock()
		ok, ch := cond(), m.changed
		m.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-t.Context().Done():
			t.Fatal("test ended while waiting")
		}
	}
}

func (m *mockServer) serve(c net.Conn, cfg *ssh.ServerConfig, wg *sync.WaitGroup) {
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	defer sc.Close()
	wg.Go(func() {
		for r := range reqs {
			m.global(sc, r, wg)
		}
	})
	for nc := range chans {
		wg.Go(func() { m.channel(nc) })
	}
}

func (m *mockServer) global(sc *ssh.ServerConn, r *ssh.Request, wg *sync.WaitGroup) {
	m.mu.Lock()
	m.globals = append(m.globals, r)
	deny := m.denyForward
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.notify()
		m.mu.Unlock()
	}()
	var (
		key, kind string
		ln        net.Listener
		err       error
		reply     []byte
		msg       func(net.Conn) []byte
	)
	switch r.Type {
	case "tcpip-forward":
		var p struct {
			Host string
			Port uint32
		}
		if deny || ssh.Unmarshal(r.Payload, &p) != nil {
			r.Reply(false, nil)
			return
		}
		if ln, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(p.Port)))); err != nil {
			r.Reply(false, nil)
			return
		}
		port := uint32(ln.Addr().(*net.TCPAddr).Port)
		if p.Port == 0 {
			reply = ssh.Marshal(&struct{ Port uint32 }{port})
		}
		key, kind = p.Host+":"+strconv.Itoa(int(port)), "forwarded-tcpip"
		msg = func(c net.Conn) []byte {
			o := c.RemoteAddr().(*net.TCPAddr)
			return ssh.Marshal(&struct {
				Addr     string
				Port     uint32
				OrigAddr string
				OrigPort uint32
			}{p.Host, port, o.IP.String(), uint32(o.Port)})
		}
	case "streamlocal-forward@openssh.com":
		var p struct{ Path string }
		if deny || ssh.Unmarshal(r.Payload, &p) != nil {
			r.Reply(false, nil)
			return
		}
		if ln, err = net.Listen("unix", p.Path); err != nil {
			r.Reply(false, nil)
			return
		}
		key, kind = p.Path, "forwarded-streamlocal@openssh.com"
		msg = func(net.Conn) []byte { return ssh.Marshal(&struct{ Path, Reserved string }{p.Path, ""}) }
	case "cancel-tcpip-forward":
		var p struct {
			Host string
			Port uint32
		}
		ssh.Unmarshal(r.Payload, &p)
		m.cancel(p.Host + ":" + strconv.Itoa(int(p.Port)))
		r.Reply(false, nil)
		return
	case "cancel-streamlocal-forward@openssh.com":
		var p struct{ Path string }
		ssh.Unmarshal(r.Payload, &p)
		m.cancel(p.Path)
		r.Reply(false, nil)
		return
	default:
		r.Reply(false, nil)
		return
	}
	m.mu.Lock()
	m.fwds[key] = ln
	m.mu.Unlock()
	r.Reply(true, reply)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				ch, reqs, err := sc.OpenChannel(kind, msg(c))
				if err != nil {
					var oe *ssh.OpenChannelError
					if errors.As(err, &oe) {
						m.mu.Lock()
						m.refusals = append(m.refusals, oe.Reason.String()+": "+oe.Message)
						m.notify()
						m.mu.Unlock()
					}
					c.Close()
					return
				}
				go ssh.DiscardRequests(reqs)
				pipe(c, ch)
			})
		}
	})
}

func (m *mockServer) cancel(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ln := m.fwds[key]; ln != nil {
		ln.Close()
		delete(m.fwds, key)
	}
}

func (m *mockServer) channel(nc ssh.NewChannel) {
	rec := openRecord{kind: nc.ChannelType()}
	var network, addr string
	switch nc.ChannelType() {
	case "direct-tcpip":
		var p struct {
			Host     string
			Port     uint32
			OrigHost string
			OrigPort uint32
		}
		if err := ssh.Unmarshal(nc.ExtraData(), &p); err != nil {
			nc.Reject(ssh.ConnectionFailed, err.Error())
			return
		}
		rec.host, rec.port, rec.origHost, rec.origPort = p.Host, p.Port, p.OrigHost, p.OrigPort
		network, addr = "tcp", net.JoinHostPort(p.Host, strconv.Itoa(int(p.Port)))
	case "direct-streamlocal@openssh.com":
		var p struct {
			Path     string
			OrigHost string
			OrigPort uint32
		}
		if err := ssh.Unmarshal(nc.ExtraData(), &p); err != nil {
			nc.Reject(ssh.ConnectionFailed, err.Error())
			return
		}
		rec.host, rec.origHost, rec.origPort = p.Path, p.OrigHost, p.OrigPort
		network, addr = "unix", p.Path
	default:
		nc.Reject(ssh.UnknownChannelType, "no")
		return
	}
	m.mu.Lock()
	m.opens = append(m.opens, rec)
	m.notify()
	m.mu.Unlock()
	c, err := net.Dial(network, addr)
	if err != nil {
		nc.Reject(ssh.ConnectionFailed, err.Error())
		return
	}
	ch, reqs, err := nc.Accept()
	if err != nil {
		c.Close()
		return
	}
	go ssh.DiscardRequests(reqs)
	pipe(c, ch)
}

// pipe relays with half-close, as sshd does.
func pipe(c net.Conn, ch ssh.Channel) {
	done := make(chan struct{})
	go func() {
		io.Copy(c, ch)
		closeWrite(c)
		close(done)
	}()
	io.Copy(ch, c)
	ch.CloseWrite()
	<-done
	ch.Close()
	c.Close()
}

// target is a TCP or unix server that reads to EOF, then answers
// "got:"+what it read and closes.
func target(t *testing.T, network, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				b, err := io.ReadAll(c)
				if err == nil {
					c.Write(append([]byte("got:"), b...))
				}
			})
		}
	})
	return ln
}

func testLogger(t *testing.T) logrus.FieldLogger {
	l := logrus.New()
	l.SetLevel(logrus.DebugLevel)
	var mu sync.Mutex
	done := false
	t.Cleanup(func() { mu.Lock(); done = true; mu.Unlock() })
	l.SetOutput(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			t.Log(string(p))
		}
		return len(p), nil
	}))
	return l
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// roundTrip sends msg on c, half-closes, and returns all that comes back.
func roundTrip(t *testing.T, c net.Conn, msg string) string {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	closeWrite(c)
	b, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		t.Fatal(err)
	}
	return string(b)
}
