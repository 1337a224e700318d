// Package journal keeps a bounded record of the daemon's most recent
// invocations, for the debug view (package fusefs) and for status.
//
// # Recording
//
// A Journal is a ring of the last N invocations (DefaultSize unless New
// is given another size; NewWith takes a Config, whose Off records
// nothing). Finished entries leave it with Expire (Config.Keep after
// they ended, DefaultKeep unless set) and DropTarget (the daemon calls
// it when a target's connections close); what they captured is
// overwritten as they go. Begin starts an Entry and gives it the next
// sequence number, counting from 1; the daemon then feeds it as the
// invocation proceeds:
//
//	e := j.Begin(target, "exec", argv)
//	e.SetRoute("module")          // once the command is classified
//	e.AppendStdin(chunk)          // or SetStdin(all), or e.Stdin() as an io.Writer
//	e.MarkRemoteStart()           // the remote side starts working
//	e.AppendStdout(chunk)         // e.Stdout() and e.Stderr() are io.Writers too
//	e.Finish(exit)
//
// Entry methods are safe for concurrent use, never fail and never block
// on I/O. A nil *Journal records nothing and its Begin returns a nil
// *Entry, whose methods do nothing: the daemon needs no branches when
// the journal is off.
//
// Each of stdin, stdout and stderr keeps its first CaptureLimit bytes
// (stdin that is a module's wrapper, WrapperCaptureLimit: its code, not
// its zip); a Capture also tells how many bytes passed in all and
// whether some were dropped.
//
// # Modules
//
// The daemon takes a wrapper it runs apart once (package
// interp/ansiballz) and hands the value to SetModule: the file's of a
// `python AnsiballZ_x.py` run, or stdin's with pipelining, where it calls
// AwaitModule before stdin flows, so that the entry neither scans the
// stream nor shows it before it knows whether it was a no_log task's.
// What it read and did not take apart goes to SetModuleSource, which
// scans it. Otherwise, when stdin is an AnsiballZ wrapper (a piped
// transfer of one), the entry picks the module name and its arguments
// out of the stream as it passes, so the wrapper need not fit in the
// capture. DecodeAnsiballZ does the same for a complete wrapper: it
// reads the module name and the parameters' literal of Ansible's
// ANSIBALLZ_TEMPLATE (module_common.py), and returns the
// ANSIBLE_MODULE_ARGS object pretty-printed.
//
// # no_log
//
// A module whose arguments say _ansible_no_log (Ansible's no_log: true),
// or a wrapper whose arguments cannot be read, keeps only its name: its
// arguments, stdin, stdout and stderr are dropped and overwritten as soon
// as that is known, its argv is cut to the program's name, and later
// bytes are counted, not kept (EntryView.NoLog). Conceal does the same
// for an invocation the daemon cannot tell from a no_log task's (raw,
// script), HideStdin for stdin alone, for uploads, whose task cannot be
// told. A module's own no_log parameters, which its result masks as
// VALUE_SPECIFIED_IN_NO_LOG_PARAMETER (or, from ansible-core 2.22 on,
// lists in _ansible_new_secrets), become secrets (below) when the entry
// finishes: they are masked in every entry, later ones too, as Ansible
// 2.22 masks them in later tasks' results. A value sent as a number
// (which the module masked once made a string) becomes one as its JSON
// text, as it stands in the arguments and the wrapper; a short one masks
// that text wherever it appears, as Ansible's own masking of its result
// does. A boolean does not, as Ansible's list_no_log_values skips it. An entry that finishes without a result keeps its
// arguments' names only, as nothing tells which values are those.
//
// # Redaction
//
// AddSecret registers a secret, such as a password typed at a become
// prompt. Everything a Journal returns (argv, target, route, captures,
// module arguments) has each occurrence of a secret replaced by Mask.
// Redaction happens when a view is made, over whole buffers, so a secret
// split across Append calls is still found, and secrets registered late
// apply to entries recorded earlier; AddSecret and Finish also rewrite
// the kept bytes masked. The Redactor keeps no secret: per form, its
// length, 32 bits of a rolling hash (to find candidates) and an
// HMAC-SHA256 under a random per-process key (to confirm them). Secrets are also matched in the
// escaped forms in which they appear inside an AnsiballZ wrapper (JSON
// string escapes, then a Python string literal) and in module arguments
// (JSON). Where a capture was cut short, its last bytes, which could be
// the start of a secret, are left out of the view. Raw bytes stay in memory only; the journal
// never logs.
//
// # Views
//
// Snapshot, Get and List return values made under the lock, so they do
// not change as the entry goes on. The views of finished entries are
// cached and shared between callers: treat their slices as read-only.
package journal
