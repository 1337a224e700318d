// Package wire is the framing spoken between the shim (fakessh) and the
// bridge daemon over a unix socket.
//
// # Frames
//
// Every frame is one type byte, a big-endian uint32 payload length, and the
// payload. Payloads are capped at MaxPayload so that a malformed or hostile
// peer cannot make either side allocate without bound.
//
// # Conversation
//
// The shim sends a Hello (JSON). The daemon answers Accept (go on and pump
// stdin), Fallback (exec the real binary; nothing has been consumed) or, for
// immediate answers, output frames followed by Exit. After Accept, stdin
// flows as Stdin frames ending in StdinEOF; output comes back as Stdout and
// Stderr frames; Exit ends the conversation. The daemon may ask the shim to
// prompt on its terminal (Prompt/PromptReply) at any time, e.g. for a
// password while it logs in, or to start a ProxyCommand as ssh's child
// (ProxyCommand/ProxyStarted, the latter carrying the proxy's pipes and
// pidfd with SCM_RIGHTS).
//
// The package is stdlib-only: the shim starts once per Ansible step and must
// stay small.
package wire
