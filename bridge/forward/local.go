package forward

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
	"github.com/sirupsen/logrus"
	"golang.org/x/crypto/ssh"
)

// niMaxHost (NI_MAXHOST) and sshclient.SunPathMax are the limits
// channels.c checks before listening.
const niMaxHost = 1025

// localFwd is a -L or -D forward: its listeners on this side.
type localFwd struct {
	spec Spec
	lns  []net.Listener
}

// close closes the listeners. A unix socket's file stays, as OpenSSH
// leaves it (StreamLocalBindUnlink is how a later bind replaces it).
func (f *localFwd) close() {
	for _, ln := range f.lns {
		ln.Close()
	}
}

func (s *Set) openLocal(ctx context.Context, spec Spec, log logrus.FieldLogger) error {
	s.setupMu.Lock()
	defer s.setupMu.Unlock()
	s.mu.Lock()
	closed := s.closed
	for _, f := range s.local {
		if f.spec.same(spec) {
			s.mu.Unlock()
			log.Debug("mux_master_process_open_fwd: found existing forwarding")
			return nil
		}
	}
	s.mu.Unlock()
	if closed {
		return &Error{Reason: reasonFailed, Err: net.ErrClosed}
	}

	f, err := s.listen(ctx, spec, log)
	if err != nil {
		log.Error(err)
		log.Infof("mux_master_process_open_fwd: requested %s failed", s.describe(spec))
		return &Error{Reason: reasonFailed, Err: err}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		f.close()
		return &Error{Reason: reasonFailed, Err: net.ErrClosed}
	}
	s.local = append(s.local, f)
	for _, ln := range f.lns {
		s.wg.Go(func() { s.accept(f, ln, log) })
	}
	s.mu.Unlock()
	return nil
}

func (s *Set) cancelLocal(spec Spec) error {
	s.mu.Lock()
	var found *localFwd
	for i, f := range s.local {
		if f.spec.same(spec) {
			found = f
			s.local = append(s.local[:i:i], s.local[i+1:]...)
			break
		}
	}
	s.mu.Unlock()
	if found == nil {
		return &Error{Reason: reasonNotForwarded}
	}
	found.close()
	return nil
}

// listen is channel_setup_local_fwd_listener.
func (s *Set) listen(ctx context.Context, spec Spec, log logrus.FieldLogger) (*localFwd, error) {
	if spec.ConnectPort != PortIsPath {
		if spec.ConnectHost == "" {
			return nil, errors.New("no forward host name")
		}
		if len(spec.ConnectHost) >= niMaxHost {
			return nil, errors.New("forward host name too long")
		}
	} else if spec.ListenPort == PortIsPath && len(spec.ConnectHost) > sshclient.SunPathMax {
		return nil, fmt.Errorf("local connecting path too long: %s", spec.ConnectHost)
	}
	f := &localFwd{spec: spec}
	if spec.ListenPort == PortIsPath {
		if spec.ListenHost == "" {
			return nil, errors.New("no forward path name")
		}
		ln, err := listenUnix(spec.ListenHost, s.opts.StreamLocalBindMask, s.opts.StreamLocalBindUnlink, log)
		if err != nil {
			return nil, err
		}
		f.lns = []net.Listener{ln}
		log.Debugf("Local forwarding listening on path %s.", spec.ListenHost)
		return f, nil
	}

	addrs, err := s.bindAddrs(ctx, spec.ListenHost)
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	for i, a := range addrs {
		network := "tcp6"
		if a.Is4() {
			network = "tcp4"
		}
		ln, err := lc.Listen(ctx, network, net.JoinHostPort(a.String(), strconv.Itoa(spec.ListenPort)))
		if err != nil {
			// OpenSSH tells of all but the last failure only verbosely:
			// one family may well be taken or missing.
			if i == len(addrs)-1 {
				log.Error(err)
			} else {
				log.Debug(err)
			}
			continue
		}
		log.Debugf("Local forwarding listening on %s.", ln.Addr())
		f.lns = append(f.lns, ln)
	}
	if len(f.lns) == 0 {
		return nil, fmt.Errorf("cannot listen to port: %d", spec.ListenPort)
	}
	return f, nil
}

// bindAddrs is channel_fwd_bind_addr for the client side, followed by
// getaddrinfo: no host is loopback unless GatewayPorts, "*" is every
// address, "localhost" is loopback in both families.
func (s *Set) bindAddrs(ctx context.Context, host string) ([]netip.Addr, error) {
	wildcard := false
	switch host {
	case "":
		wildcard = s.opts.GatewayPorts
	case "*":
		wildcard = true
	case "localhost":
	default:
		if a, err := netip.ParseAddr(host); err == nil {
			return []netip.Addr{a}, nil
		}
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("getaddrinfo(%s): %w", host, err)
		}
		return ips, nil
	}
	if wildcard {
		return []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()}, nil
	}
	return []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}, nil
}

// listenUnix is unix_listener under umask(mask). The umask is
// process-wide, so rather than setting it the socket is bound in a fresh
// 0700 directory beside path, given its mode there, and hard-linked into
// place: no one can connect before the mode is right, and an existing
// file is not clobbered (bind's EADDRINUSE becomes link's EEXIST).
func listenUnix(path string, mask os.FileMode, unlinkFirst bool, log logrus.FieldLogger) (*net.UnixListener, error) {
	if len(path) >= sshclient.SunPathMax {
		return nil, fmt.Errorf("unix_listener: path %q too long for Unix domain socket", path)
	}
	if unlinkFirst {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Errorf("unlink(%s): %v", path, err)
		}
	}
	mode := 0o777 &^ mask.Perm()
	dir, err := os.MkdirTemp(filepath.Dir(path), ".fwd")
	if err != nil {
		return nil, fmt.Errorf("unix_listener: cannot bind to path %s: %w", path, err)
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "s")
	if len(tmp) >= sshclient.SunPathMax {
		// No room for the detour: bind in place and set the mode
		// straight after. Until then the process umask applies.
		return bindUnix(path, path, mode)
	}
	ln, err := bindUnix(tmp, tmp, mode)
	if err != nil {
		return nil, err
	}
	if err := os.Link(tmp, path); err != nil {
		ln.Close()
		return nil, fmt.Errorf("unix_listener: cannot bind to path %s: %w", path, err)
	}
	return ln, nil
}

func bindUnix(bind, path string, mode os.FileMode) (*net.UnixListener, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: bind, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("unix_listener: cannot bind to path %s: %w", path, err)
	}
	// Closing leaves the file, as OpenSSH does (the temporary name
	// goes with its directory).
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(bind, mode); err != nil {
		ln.Close()
		os.Remove(bind)
		return nil, fmt.Errorf("unix_listener: %w", err)
	}
	return ln, nil
}

// accept is channel_post_port_listener for one listener.
func (s *Set) accept(f *localFwd, ln net.Listener, log logrus.FieldLogger) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			log.Errorf("accept: %v", err)
			// OpenSSH waits a second before accepting again (EMFILE).
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		if !s.track(conn) {
			return
		}
		if !s.spawn(func() { s.serveLocal(f.spec, conn, log) }) {
			conn.Close()
			return
		}
	}
}

// serveLocal opens the channel for one accepted connection and relays;
// the kind of channel follows the connect port, as in channels.c.
func (s *Set) serveLocal(spec Spec, conn net.Conn, log logrus.FieldLogger) {
	defer s.untrack(conn)
	defer conn.Close()
	origHost, origPort := originator(conn.RemoteAddr())
	var (
		kind    string
		payload []byte
		reply   []byte // a SOCKS reply, sent once the channel is open
		rest    []byte // what the SOCKS client sent after its request
	)
	switch spec.ConnectPort {
	case PortIsPath:
		kind = "direct-streamlocal@openssh.com"
		payload = ssh.Marshal(&struct {
			Path     string
			OrigHost string
			OrigPort uint32
		}{spec.ConnectHost, origHost, origPort})
	case 0:
		req, err := readSOCKS(conn, conn)
		if err != nil {
			log.Debugf("dynamic request: %v", err)
			return
		}
		kind, payload, reply, rest = "direct-tcpip", directTCPIP(req.host, req.port, origHost, origPort), req.reply, req.rest
	default:
		kind, payload = "direct-tcpip", directTCPIP(spec.ConnectHost, uint32(spec.ConnectPort), origHost, origPort)
	}
	ch, reqs, err := s.client.OpenChannel(kind, payload)
	if err != nil {
		// The mux client never hears of this; the master only logs it.
		var oce *ssh.OpenChannelError
		if errors.As(err, &oce) {
			log.Infof("channel: open failed: %s: %s", oce.Reason, oce.Message)
		} else {
			log.Infof("channel: open failed: %v", err)
		}
		return
	}
	s.relay(conn, ch, reqs, reply, rest)
}

func directTCPIP(host string, port uint32, origHost string, origPort uint32) []byte {
	return ssh.Marshal(&struct {
		Host     string
		Port     uint32
		OrigHost string
		OrigPort uint32
	}{host, port, origHost, origPort})
}

// originator is get_peer_ipaddr and get_peer_port: the numeric address
// of a TCP peer; an unnamed unix socket peer is "" and port 0.
func originator(a net.Addr) (string, uint32) {
	if t, ok := a.(*net.TCPAddr); ok {
		host := t.IP.String()
		if t.Zone != "" {
			host += "%" + t.Zone
		}
		return host, uint32(t.Port)
	}
	// Go names an unnamed or abstract peer "@..."; sun_path reads as "".
	if u, ok := a.(*net.UnixAddr); ok && !strings.HasPrefix(u.Name, "@") {
		return u.Name, 0
	}
	return "", 0
}
