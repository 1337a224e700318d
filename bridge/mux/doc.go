// Package mux is an OpenSSH ControlMaster's side of the multiplexing
// protocol (OpenSSH 9.2's mux.c, PROTOCOL.mux version 4), so that a real
// ssh run with the daemon's ControlPath shares the daemon's connection
// exactly as it would share an `ssh -M` master's: it authenticates
// nothing, and what it asks for runs over the live connection.
//
// Listen puts the socket in place as muxserver_listen does (a temporary
// name beside the path, 0600, hard-linked into place so that a racing
// master finds EEXIST); Listener.Serve answers each client:
//
//   - hello, alive check (the master's pid: Listener.SetPID's, a process
//     standing for that one master, or the daemon's), terminate and stop
//     listening (`ssh -O check|exit|stop`);
//   - passenger sessions: the client passes its stdin, stdout and stderr,
//     and the server runs the session channel on them itself, with the
//     client's terminal modes and window size read from the passed
//     descriptor, the escape character filtered as the master filters a
//     mux client's (~. ~B ~? ~#, and "not available" for the rest), window
//     changes on SIGWINCH (the client relays its SIGWINCH to the master's
//     pid, whose owner calls Listener.WindowChanged; the daemon's own
//     SIGWINCH reaches every session), and the exit status sent back; a client that goes away closes
//     its channel, as the master's cleanup does;
//   - stdio forwarding (`ssh -W`) on the passed descriptors;
//   - port forwarding requests (-L, -R, -D, `-O forward|cancel`), handed to
//     the Master, which owns the forwards as the master process does.
//
// A request the Master's connection ended under (ErrMasterGone) drops its
// client unanswered, as ssh's master exits then: the client says "read
// from master failed" (a session's then logs in itself), not that the
// server refused.
//
// Proxy mode (MUX_C_PROXY, used by `ssh -O proxy`) is refused as
// "unsupported request" (the reply a master gives to a request it does not
// know).
//
// The passed descriptors are shared with the client's own parent (a shell,
// a terminal): the server never changes their flags. It waits on them with
// poll(2) and can be woken when a session ends, so that nothing keeps
// reading a user's terminal after the session it belonged to (OpenSSH's
// master likewise keeps terminals blocking and polls them).
package mux
