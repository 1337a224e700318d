// Package forward owns the port forwardings of one master connection, as
// OpenSSH 9.2's ControlMaster does for MUX_C_OPEN_FWD and MUX_C_CLOSE_FWD
// (ssh -L, -R, -D, ssh -O forward, ssh -O cancel). The mux server parses
// the request into a Spec, calls Set.Open or Set.Cancel, and puts the
// *Error's message, which is OpenSSH's own reason, in MUX_S_FAILURE. The
// forwards outlive the mux client that asked for them; Set.Close ends them
// with the connection.
//
// # Requests
//
// Open checks a Spec as mux_master_process_open_fwd does ("Invalid
// forwarding request" for a bad kind, a path listener for -D, a local
// forward without a connect port, a missing connect host), and a forward
// equal in every field but the kind to one already open succeeds again
// without a second listener; for -R with port 0 it returns the port
// allocated the first time. Cancel finds the forward the same way ("port
// not forwarded"). A port outside 0-65535 that is not PortIsPath is
// ErrMalformed: the master drops such a client.
//
// # Local and dynamic forwards
//
// Listeners bind as channel_fwd_bind_addr decides: no listen host is
// loopback (127.0.0.1 and ::1) unless GatewayPorts, "*" is every address,
// "localhost" is loopback, anything else is resolved and each address
// bound, separate IPv4 and IPv6-only sockets as OpenSSH makes them; the
// forward stands if any address could be bound, else "Port forwarding
// failed". The connect port picks what an accepted connection becomes, as
// in channels.c: PortIsPath opens direct-streamlocal@openssh.com, 0 speaks
// SOCKS, anything else opens direct-tcpip, each carrying the originator's
// numeric address and port ("" and 0 for a unix socket peer). A refused
// channel closes the connection and is only logged.
//
// SOCKS is channel_decode_socks4 and channel_decode_socks5: SOCKS4,
// SOCKS4A and SOCKS5 without authentication, CONNECT only, to IPv4, IPv6
// or a name. The success reply (SOCKS4 90, SOCKS5 0 bound to 0.0.0.0:0) is
// written only once the channel is open; anything refused, and a channel
// that cannot be opened, closes the connection without a reply, as
// OpenSSH does (a SOCKS5 client has had its method reply by then).
//
// A unix socket listener gets mode 0777 &^ StreamLocalBindMask and, with
// StreamLocalBindUnlink, replaces a file already there. OpenSSH sets the
// umask around bind(2); the umask is process-wide in Go, so instead the
// socket is bound in a new 0700 directory beside the path, given its mode
// and hard-linked into place (bind's "in use" becomes link's "exists").
// Cancel and Close leave the file, as OpenSSH does.
//
// # Remote forwards
//
// Open sends tcpip-forward with the bind host as channel_rfwd_bind_host
// makes it (none is "localhost", "*" is ""), or
// streamlocal-forward@openssh.com for a path; a refusal is "remote port
// forwarding failed for listen port N" (or "listen path P"). Cancel sends
// cancel-tcpip-forward (or cancel-streamlocal-forward@openssh.com) without
// asking for a reply. A forwarded channel is matched by the host string
// and port the server names, then its target is connected before the
// channel is confirmed, as channels.c's connect_to: each address in turn
// with a non-blocking connect(2). Where every address failed in
// connect(2) itself (or the name did not resolve), it is refused with
// "open failed" (administratively prohibited) and Options.Say is told
// "connect to HOST port PORT failed: REASON"; where a connect in progress
// failed (a refused loopback port is one), "connect failed" with the
// error, and "connect_to HOST port PORT: failed.". A remote forward whose connect port is 0
// (ssh -R [addr:]port; the connect host is "socks") is dynamic: the
// channel is confirmed at once, carries a SOCKS request, and is connected
// where it asks.
//
// x/crypto's Client.Listen is not used. It accepts a forwarded channel
// before anything is connected, so a failed connect cannot be refused; it
// refuses originators that are not IP addresses, asks for replies to
// cancels, and has no dynamic forwards. The Set takes the forwarded-tcpip
// and forwarded-streamlocal@openssh.com channel types with
// Client.HandleChannelOpen at the first remote forward; if something on
// the connection took them already, the forward fails and says why in the
// log. x/crypto cannot give a channel type back, so the goroutine that
// takes them lives until the connection ends, refusing them after Close.
//
// # Differences from OpenSSH
//
// A duplicate or a cancel arriving while the server has not yet answered
// the first request waits for that answer (OpenSSH answers a duplicate at
// once, with port 0 if allocated, and fails a pending open that is
// cancelled). A server reply with an invalid allocated port fails the
// forward; OpenSSH's master exits. Channel windows are x/crypto's.
// Permission prompts (ControlMaster ask) are not supported.
package forward
