// Package bridge is the ansible-bridge daemon: it serves the invocations
// that the ssh/scp/sftp shims (package fakessh) hand over a unix socket,
// over one persistent SSH connection per target: per ControlPath, shared
// exactly where OpenSSH would multiplex (share.go).
//
// # Lifecycle
//
// New(cfg, log) returns a Server; Run(ctx, ln) serves the listener from
// Listen until ctx ends, the idle timeout passes, or `ansible-bridge
// stop` asks it to. Listen keeps one daemon per socket with a lock file
// held for the life of the process, removes a stale socket, and makes the
// socket 0600 in a 0700 directory it has checked (wire.EnsurePrivateDir:
// ours, not a symlink) before writing anything there; each connection's
// peer uid must be the daemon's. The shim makes the same checks from its
// side (wire.Dial).
//
// # Targets
//
// A target is a ControlPath's (expanded as ssh does, from the command
// line merged with ssh_config, see package sshclient): invocations share
// it where ssh would multiplex them over a master (share.go), and the
// invocation that logs in does so with its own settings. A login holds
// no lock of the target's: one waiting at a password prompt holds up
// neither status, control requests (which find no socket yet, as ssh's
// master listens once logged in) nor another invocation's login beside
// it, as two ssh log in side by side; the one that finishes second
// finds the socket taken and, as ssh, goes on without multiplexing, on
// a connection of its own. When the
// server refuses a session (OpenSSH's MaxSessions) and the bridge's own
// interpreters hold none on that connection, ssh's mux client would be
// refused too: the invocation says so and logs in itself, on a connection
// only it rides, which ends with it. Where the interpreters hold sessions
// the refusal may be theirs alone (ssh's master, holding all but those,
// would have served it): the invocation then logs in on a connection of
// its own as quietly, and its session is a mux client's. A connection found dead is redialled on next use. Session
// opens wait on the server without the target's lock, so that control
// requests and a keepalive timeout never wait behind a hung server; a
// client whose session open was pending on a connection that then ended
// (closed by the daemon or by the server) says "read from master failed"
// and logs in itself, as ssh's mux client does. A subsystem is asked for
// after its channel's open, as ssh's master does: a connection lost then
// ends the client with 255, as a lost exec does.
// A target is named user@host:port (parts clipped), with #2, #3… for
// other targets to the same place through other control paths; it keeps its name
// for its life. A target that never connected is forgotten once nothing
// uses it. After its connections close, a target keeps only its status
// row and counters; when ControlPersist closes the daemon's last
// connection, the freed memory goes back to the system at once.
//
// # Routes
//
// Each ssh invocation is parsed once into a request (request.go: the
// command line, its settings, the target, the remote command and how
// classify reads it), which the route table (routes.go) hands to the
// first route that matches; a route may decline before it has touched
// the shim's stdin, and the next is tried. One file per route, named
// after it; the names are those status counts:
//
//   - control (route_control.go): `ssh -O check|stop|exit` answered as a
//     ControlMaster would; stop detaches the target's connections
//     (closed when their sessions end) and interpreters (closed once the
//     invocations in flight at the stop have finished) so the next step
//     logs in afresh, as `meta: reset_connection` expects, while another
//     run's step in flight completes. Held temp dirs stay: to Ansible
//     they are on the target. check names the master's pid: with
//     ControlPersist a process of the master's own (masterstub.go, the C
//     front's stub mode), whose death by a signal ends that master as
//     ssh's would end; without, the daemon's.
//   - dd (route_dd.go): Ansible's piped transfer (`dd of=PATH bs=65536`)
//     into a held temp dir is kept in memory; anything else is the real
//     dd, run by the login user's interpreter when one is up, else in a
//     session of its own. Never through SFTP, whose policy (none,
//     read-only, a umask, request lists) is not a shell command's.
//   - cached (route_cached.go): Ansible's temp-dir housekeeping (echo ~,
//     mkdir ansible-tmp, chmod u+x, rm -f -r) answered by the bridge;
//     uploads into the temp dirs it holds stay in memory (housekeeping.go),
//     until written to the target by the login user's interpreter, else
//     through SFTP, else (sftp refusing) by shell commands.
//     Permission steps for an unprivileged become user (setfacl, chmod
//     +a, chgrp, chmod a+rX) run on the target (exec).
//   - module (route_module.go): an AnsiballZ wrapper (a held file, or
//     piped) runs in the target's persistent interpreter for that python
//     (package interp, started by package bootstrap); agents.go keeps at
//     most Config.MaxInterpreters per target, least recently used idle
//     one retired first. A slot is starting, ready, failed or closed
//     under one lock per target, never held while an interpreter boots
//     or closes: callers of a starting slot wait on its ready channel,
//     status does not wait at all, and a boot counts against the limit
//     from the moment it is reserved.
//   - become (route_become.go): a sudo/su/doas wrapper (package become)
//     around a module runs in an interpreter of the become user, started
//     once through Ansible's own wrapper with the password exchange
//     relayed (becomeagents.go). Module and become give a -tt step a
//     PTY only where sshd would: they ask it once per connection
//     (sshConn.ptyGranted), and a step sshd refuses one runs as sent
//     (exec).
//   - exec (route_exec.go): everything else runs as a session channel,
//     with a PTY for -tt (no terminal modes, size 0x0 unless the shim's
//     stdin is a terminal: what ssh sends), exit status and `Shared
//     connection to HOST closed.` as OpenSSH prints them; a PTY sshd
//     refuses is answered as the master's options say (ptyRefused).
//
// sftp (batch mode) and scp are programs of their own (transfer.go),
// served by one SFTP channel per connection; files land atomically
// (hidden temp, fsync, rename). Without a usable sftp subsystem they fail
// with OpenSSH's sftp-client lines (nosftp.go).
//
// Anything the bridge does not understand is handed back to the shim as
// a Fallback before any input is read, and the shim execs the real
// binary.
//
// # Debugging
//
// Every invocation but the control requests goes into a journal (package
// journal; passwords typed at prompts are registered as secrets and
// masked). Status reports targets, interpreters, each invocation in one
// route (or, with no target's row, by outcome: Status.NoTarget) and the
// invocations in flight (RenderTop draws it for `ansible-bridge top`); Mount exposes the
// journal, the shared temp dirs and the status as a read-only file system
// (package fusefs, mount.go). An ssh -v on the shim logs that invocation
// at debug level.
package bridge
