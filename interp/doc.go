// Package interp is the persistent remote interpreter: a Python agent
// (agent.py, standard library only, Python 3.6+, embedded as AgentSource)
// and its Go Client.
//
// # Starting
//
// Package bootstrap starts the agent over an exec channel and calls
// NewClient, which waits for the agent's hello (AgentInfo). The agent
// first dups its stdin and stdout to private descriptors for the protocol
// and points fds 0 and 1 at /dev/null, so that nothing printed by the
// agent, a zygote or a module can reach the channel. Anything a login
// script prints before the agent starts is skipped: the hello follows a
// magic string (Magic).
//
// # Source
//
// agent.py is one file on purpose. The bootstrap's first stage execs one
// source string (AgentSource, zlib-compressed in bootstrap.Payload) with
// no import machinery, so several files would travel as one anyway:
// concatenated (then no part imports on its own, for its tests or for
// pyflakes, without stubs) or as a zip with an importer (an import per
// part at every agent start, zipimport on every target). One file keeps
// the payload, the first stage and the start as they are. It is in
// sections, from the bottom of the process stack up: protocol, frames,
// files, wrappers, warm-up, prefault, task (run_task, one function per
// step a spare takes with its task), zygote (class ZygoteServer, run in
// each zygote process), agent (class Agent; requests go through a table,
// Agent.OPS, to one op_* method each).
//
// agent_test.py holds its unit tests (stdlib unittest, no Go needed;
// make agent-test runs them on every Python 3.6+ here), the whole agent
// in a child process driven as Client drives it among them. make lint
// compiles agent.py with each of those Pythons and runs pyflakes3 over
// it. Protocol, Magic, the frame types, headerSize and maxFrame are
// written on both sides; TestAgentConstants and agent_test.py's
// ProtocolConstantsTest check that they agree.
//
// # Protocol
//
// Frames in both directions: uint32 length | uint8 type | uint32 request
// id | payload, the length counting type, id and payload (big-endian).
// Requests and responses carry uint32 JSON length | JSON | raw bytes (file
// data, zips). Request ids are chosen by the client and many requests are
// in flight at once; command output streams back in stdout/stderr frames
// before the response, stdin in stdin/EOF frames, a written frame says a
// module request's files are on disk (ModuleRequest.Written), and a
// cancel frame kills the request's process group. The agent is a single-threaded selectors
// loop, so it can fork at any time, and it never blocks on a child: the
// output it has not yet sent is bounded (reading child pipes pauses above
// 4 MiB). It exits, removing the payload dirs of tasks still running,
// when its stdin ends.
//
// # Operations
//
// Ping, Stat, Mkdir, Chmod, RemoveAll, PutFile (atomic: hidden temp file,
// fsync, rename), GetFile, Exec (/bin/sh -c with streams, env, exit
// status, optionally on a PTY) and RunModule. Remote errno values come back as
// *fs.PathError wrapping syscall.Errno, so errors.Is(err, fs.ErrNotExist)
// works.
//
// # Temp dir
//
// The agent's temp root (AgentInfo.TmpDir) is the first of $TMPDIR,
// $TEMP, $TMP, /tmp, /var/tmp, /usr/tmp and the login directory that is
// writable and not mounted noexec (statvfs ST_NOEXEC). Nothing of the
// agent's own has a name there: its zygotes' compiled-code cache is a
// file it opened unlinked (O_TMPFILE) before forking them. A module's
// payload dir (below) is there only while a task of that module runs,
// as stock's wrapper has its own, so that a task listing the temp root
// finds what it would after stock's tasks.
//
// # Modules
//
// RunModule takes the AnsiballZ wrapper Ansible generated, as package
// ansiballz took it apart (the caller parses it once): the base64 zip in
// its ZIPDATA literal is sent once per agent and per set of files (a zip
// whose files, names, CRC-32s and sizes, are those of one sent before,
// the same module built by a later playbook run with new time stamps,
// goes as a reference to that one: moduleReq.Twin); the rest, the
// template, goes whole the first
// time, and later only as the bytes between its common prefix and suffix
// with that first one (zlib-compressed; templates of one zip differ in
// their ANSIBALLZ_PARAMS literal), so a warm task costs a few hundred
// bytes instead of ~130 KiB.
//
// On the target each zip hash has a zygote (zips whose files differ only
// in their time stamps, as ansible-core 2.19+ builds a module's zip anew
// every run, share the first one's): a process forked from the
// agent that puts the zip on sys.path and imports
// ansible.module_utils.basic and what the module's source imports (found
// with ast, without running it: the module's own top-level code runs
// once per task, in the task; import errors are ignored, the real run
// reports them). While it imports, zipimport compiles each module once,
// not twice (for get_filename and again for get_code), and compiled code
// is kept in the agent's unlinked cache file by its source (records
// appended, one write each, read once the file's size covers them), so
// the zygote of another zip loads the module_utils they share instead of
// compiling it (under
// its own zip's file name; python 3.8+, where zipimport is Python); its
// tasks get zipimport unchanged. It compiles the module once and answers zipimport's
// get_code/get_filename for it from that, and caches the wrapper's
// compiled shape (the template with its ZIPDATA and ANSIBALLZ_PARAMS
// literals as markers; the request gives the parameters' and the start
// time's offsets in the template (2.19+'s date_time argument, before that
// sitecustomize.py's zip entry's time, which changed the shape every
// second), which package ansiballz found, so
// the agent does not search for them; the agent sends a zygote each shape
// once, as every write a zygote makes after a fork copies a page), so a task swaps two constants (and its file name:
// without pipelining each task's script has its own path) instead of
// compiling ~140 KB of source. That cached shape also runs the module
// from the zygote's zip on disk (read-only, 0400), where the wrapper
// would write its zip to a fresh temp dir, append a sitecustomize.py and
// remove the dir, about a millisecond per task. The zygote's zip is in a
// dir named as stock's (TMP/ansible_NAME_payload_XXXXXXXX/
// ansible_NAME_payload.zip), one path per zygote (zipimport reads the
// file by that path at each import): the agent writes it (no fsync) as
// a task of the zip comes and removes it once none runs and no zygote
// is importing from it, before the task's answer, ~0.2-0.5 ms per task
// on this code's test machine (stock's wrapper does the same work). A
// task that ends without writing its status (killed, os._exit) leaves it,
// as stock's wrapper, cut short before its finally, leaves its own; the
// next task then gets a new dir and a new zygote. The wrapper's own lines
// for that (each found exactly once, else the wrapper runs as it is)
// give way to lines that do without, with line numbers kept, so that a
// traceback through the wrapper reads as stock's; the module's
// _modlib_path (which respawn_module uses) is the zygote's zip. Then it freezes the garbage collector's
// view of that heap (gc.freeze) so children do not copy it on write. The
// zygote keeps one child forked ahead (a spare, already in its own
// session with an empty pipe at its end as stdin) so that no fork is on a request's
// path, and hands it to the agent (its pid and control socket, over
// SCM_RIGHTS): the agent sends the next task straight to it, then tells
// the zygote, which has the next spare forked. A task that finds no spare
// at the agent (the first, or one whose spare died) goes through the
// zygote, which has one forked on the spot. The zygote does not fork its
// spares itself but through a seed, a fork of it that forks a spare
// whenever the zygote asks (a byte; the answer, the spare's pid and
// control socket), reaps them and writes their exits to a pipe the zygote
// reads: a fork write-protects every page of the process that forks, and
// the zygote's loop, run after each of its own forks, took ~270 page
// faults a task (a trap each, ~16 µs in a paravirtualised guest whether
// it copies or not); the seed's loop takes ~90, and the zygote's
// pages stay its own. A template's shape the zygote learns goes to the
// seed too; what else it learns (the pages to copy ahead, a changed
// resolv.conf) drops the seed, which exits once its forks have; the next
// seed is forked knowing it. A seed gone
// (killed) means the zygote forks the spare itself, and the old seed's
// forks still running are reported as killed (their statuses went to
// init; a task that ends normally reports its own). The agent, its zygotes and their spares
// pass messages in marshal's format, not JSON: they are one python, and
// json's partly-Python encoder and decoder would write to many more pages
// after each fork. Its first three tasks report which pages they came to own (copied
// on write from the zygote; /proc/self/pagemap), before their answers, so
// a warm zygote's set no longer changes (a change drops the seed); later spares copy those
// pages while they wait (madvise MADV_POPULATE_WRITE, Linux 5.14+;
// contents unchanged), first thing after the fork, which takes most
// page-fault time off a task's path for some MiB more per spare (and
// copies a page for less than a write fault does). A seed running as
// root (CAP_IPC_LOCK in the initial user namespace) pins those pages
// instead, as registered io_uring buffers: a fork copies a pinned page
// at once, for a fraction of the copy-ahead's cost (each of its pages
// takes a fault's path and a TLB flush, dear in a paravirtualised
// guest), and such pins are charged to no one (a kernel before 6.4 will
// not pin a file mapping's pages: it pins the rest, and spares copy
// those ahead). Other users' pins would count against the locked-memory
// allowance their other programs share, so their spares copy ahead; so
// do those where io_uring is refused (seccomp, io_uring_disabled).
// A task is the spare: it receives stdout/stderr pipes and an
// exit-status pipe from the agent (SCM_RIGHTS), gets an empty pipe at
// its end as stdin (what stock's pipelined module leaves its children:
// ssh's channel, read to its end), its own session, the environment with the
// request's Env on top, the agent's cwd (the login directory), and runs
// the reconstructed wrapper in the real __main__ module as python would
// run it: sys.argv [ScriptPath] and __file__ ScriptPath for a file, sys.argv
// [""] and __file__ "<stdin>" when piped. The exit status is python's:
// SystemExit(None) 0, an int its low byte, anything else printed to
// stderr and 1; an uncaught exception prints its traceback and gives 1.
// atexit handlers run and the std streams are flushed; the task then
// writes its status to the status pipe and closes its output, so the
// answer does not wait for the process teardown, and calls os._exit.
// A task killed by a signal is reported by the zygote's waitpid.
//
// # PTY
//
// With ModuleRequest.PTY (or ExecRequest.PTY) set, the process runs on a
// new pseudo-terminal, as sshd runs a command for ssh -tt (Ansible's
// default, pipelining off): the agent opens it (os.openpty, window size
// if given, the kernel's default modes: ONLCR, ECHO) and for a module
// passes the slave to the spare (SCM_RIGHTS, closing its copy once
// sent), which makes it its controlling terminal
// (TIOCSCTTY; it is a session leader; not with PTY.NotControlling, as su
// -c's command has none) and its fds 0, 1 and 2; TERM (if
// PTY.Term is set) and SSH_TTY=/dev/pts/N go into the environment under
// the request's Env. Python's stdout is then line-buffered, as for a
// terminal. The agent reads the master as stdout (EIO, once the last
// slave fd is closed, is its end): stderr is merged and LF comes back as
// CRLF; Result.Stderr stays empty. The task closes fd 0 too before its
// status, so the answer still waits for all output and no longer.
// An agent keeps at most 8 zygotes; beyond that the least recently used
// one is retired (it exits once its running tasks are done).
// An agent leaves (its channel's end, an exit request, or a SIGHUP: a
// become agent on a terminal is hung up when its connection drops, and
// sudo relays the signal) after its zygotes, which leave after their
// seeds and spares, so that no exit goes to the target's init, which may
// reap nothing; zygotes and seeds ignore SIGHUP for this, and a spare
// gives its task SIGHUP's disposition as python found it. It first
// hangs up its running tasks' terminals, as sshd hangs up a dropped
// connection's.
// Since the wrapper's own `from ansible.module_utils import basic` is now
// a cache hit, a warm task skips the imports, the bulk of a module's cost.
// Each task is a fresh fork, so nothing one task changes (monkey-patched
// stdlib, module_utils state, environment) reaches the next.
//
// Ansible's run_command passes subprocess a preexec_fn that does nothing
// on python 3 unless it is given a umask. Any preexec_fn makes python
// fork the whole task and run python in the child before the exec. On
// python 3.10+ the agent, before its first zygote, has
// Popen._execute_child drop one found to do nothing (its bytecode is the
// one ansible-core 2.14-2.22 compile to, the umask is unset, and before
// 2.18 the module's _restore_signal_handlers is theirs and PY2 false), so
// python spawns with vfork: ~2.5 ms less CPU per command on this code's
// test machine. The change is one statement compiled into
// _execute_child's code from its own source, with its line numbers, so
// tracebacks read as stock's; where recompiling the unchanged source
// does not give back the very code python loaded, nothing changes.
//
// # Freshness
//
// When /etc/resolv.conf's mtime changed since a zygote last looked, the
// zygote and the task's fork call res_init(3), so that lookups use the
// current resolver configuration as a fresh python would. When /etc/environment or
// ~/.pam_environment changed since the agent started, RunModule fails
// with ErrRestart and the agent keeps serving other operations: the
// caller should close the client and start a new agent, whose login
// environment is then the current one.
//
// # Differences from a stock run
//
//   - The interpreter is the agent's: python startup options and
//     PYTHON* variables in Env (PYTHONPATH, PYTHONIOENCODING,
//     PYTHONHASHSEED...) do not take effect; LANG/LC_* do take effect
//     for the locale module (setlocale is called again) but the std
//     streams keep the agent's encoding.
//   - Module files are imported from the zygote's copy of the zip, so
//     tracebacks and __file__ of module_utils name that path.
//   - Modules already imported by the zygote are not re-imported.
//   - Where run_command's preexec_fn does nothing, its spawn is a vfork
//     (python 3.10+): fork hooks a module registered with
//     os.register_at_fork do not run around it, and Popen._execute_child
//     holds one more statement than its source shows.
//
// # Errors
//
// When the agent dies or the channel closes, every request in flight and
// every later one fails with ErrAgentGone (with the agent's last stderr
// lines); Done is closed. No method waits forever: each is bounded by its
// ctx, and the end of ctx cancels the request.
package interp
