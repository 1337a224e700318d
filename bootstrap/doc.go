// Package bootstrap starts a persistent interpreter (package interp's
// agent) on a target, over an exec channel of the persistent connection
// or a local process in tests.
//
// # Stages
//
// Command(python) is the remote command line:
//
//	/bin/sh -c '<python> -c '"'"'import base64;exec(base64.b64decode("..."))'"'"''
//
// It runs through the login shell like Ansible's own commands. python is
// what Ansible names (/usr/bin/python3, /usr/bin/python3.11, or several
// words such as "/usr/bin/env FOO=bar python3") and is kept as given. The
// first stage travels base64-encoded, so the line holds only characters
// that no login shell (sh, bash, csh, tcsh) expands. It is a few hundred
// bytes of Python 3.6+ that reads a 4-byte big-endian length and then that
// many bytes of zlib-compressed agent source from fd 0, unbuffered and in
// a loop until the exact count. So there is no read-ahead, and no
// dependence on pipe buffer sizes or on how the data is split. It then execs the
// source with __name__ set to "__ansible_bridge_agent__". Payload() is that
// length-prefixed source.
//
// # Start
//
// Start runs Command through a Runner (the bridge: an SSH session;
// tests: LocalRunner), writes Payload and waits for the agent's hello
// (bounded by ctx, DefaultTimeout without a deadline). Every failure wraps
// ErrFailed and quotes the remote's stderr, e.g.
//
//	bootstrap failed: /usr/bin/python3: interp: agent did not start:
//	channel closed before hello: /bin/sh: 1: /usr/bin/python3: not found; exit status 127
//
// so the caller can keep the target on passthrough and log why.
//
// # Inside another command
//
// Inline(python) is the first stage as a plain command, for use inside a
// become wrapper (the bridge swaps it in for the module Ansible wrapped).
// On a terminal (become under a PTY, su) the first stage makes the
// terminal raw, sends its stderr to /dev/null and prints RawMarker before
// it reads; Attach then sends the payload over whatever channel the
// caller started and waits for the hello.
package bootstrap
