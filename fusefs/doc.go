// Package fusefs is the bridge's debug view: a read-only FUSE file
// system (hanwen/go-fuse/v2) over the daemon's state, so that ls, cat,
// less and grep -r answer "what did Ansible send, and what came back".
//
// # Layout
//
//	/status                            the daemon's status, JSON
//	/journal/                          the last invocations (package bridge/journal)
//	/journal/latest                    symlink to the newest entry
//	/journal/000123-module/            one per invocation: sequence number and route
//	    argv                           the shim's argv, shell-quoted on one line
//	    route                          e.g. module, exec, housekeeping, sftp, scp, control, passthrough, fallback
//	    target                         user@host:port
//	    stdin, stdout, stderr          the streams' first bytes (journal.CaptureLimit; a module's wrapper on stdin, WrapperCaptureLimit)
//	    timing                         "queued_ms N\nremote_ms N\ntotal_ms N\nstarted RFC3339\nstate running|done\n"
//	    exit                           the exit status, once finished
//	    module                         the AnsiballZ module's name, when one ran
//	    module_args.json               its ANSIBLE_MODULE_ARGS, pretty-printed
//	    no_log                         instead of module_args.json for a no_log module: its args and streams are not kept
//	    truncated                      which streams were cut short, if any
//	/targets/<target>/                 one per target; '/' in a name shows as %2F, '%' as %25
//	    tmpdirs                        a line per temp dir: name, held or on-target, file counts, path
//	    tmp/<ansible-tmp-…>/<file>     the shared temp dirs and their files
//
// Entry directories sort by name in the order the invocations began.
// Secrets registered with the journal (journal.Journal.AddSecret) are
// masked in everything shown, temp files included. A temp file the
// bridge holds reads from memory; one that exists only on the target is
// read from there (Source.ReadRemote) when opened.
//
// # Semantics
//
// The tree is built on demand: every lookup, listing, stat and open asks
// the Source again, so new invocations and temp dirs appear at once and
// vanished ones give ENOENT. Names and attributes are cached by the
// kernel for at most a second. Sizes are those of the content a read
// would return now; a file's content is taken when it is opened and read
// with direct I/O, so an open file reads whole and consistent even while
// the invocation behind it goes on (a temp file on the target shows the
// size the Source gives until it is opened).
//
// Everything is read-only (the mount is ro; opening for writing gives
// EROFS) and belongs to the daemon's user: directories are 0500, files
// 0400 (0500 where the temp file is executable), the kernel enforces
// them (default_permissions), and without allow_other no other user can
// enter. Errors reach the kernel as syscall.Errno only.
//
// # Mounting
//
// Mount checks Available first, so where FUSE is missing it fails with a
// one-line reason. A mount left behind by a daemon that died ("transport
// endpoint is not connected") is detached before mounting; a live FUSE
// mount at the same place is refused. As root the mount is made directly
// (mount(2)), otherwise, or if that fails, through fusermount3. Unmount
// ends it, detaching lazily if it is busy; the daemon calls it on exit.
// Logging goes to the injected logrus.FieldLogger. The daemon wires it
// so (src implements Source):
//
//	if err := fusefs.Available(); err != nil {
//		log.Warnf("no debug view: %v", err) // one line, e.g. no /dev/fuse
//		return
//	}
//	m, err := fusefs.Mount(ctx, dir, src, log)
//	if err != nil {
//		return err
//	}
//	defer m.Unmount()
package fusefs
