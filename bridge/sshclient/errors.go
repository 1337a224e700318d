package sshclient

import (
	"strings"
	"sync"

	"github.com/sirupsen/logrus"
)

// ConnError is a connection failure. Msg is exactly what OpenSSH 9.2 prints
// on stderr for it at the connection's LogLevel, lines joined with "\r\n"
// and without the final line ending; it is empty when LogLevel suppresses
// everything (ssh -q). The caller prints Stderr() and exits with
// fakessh.ExitSSHError.
type ConnError struct {
	Msg string
	Err error
}

// Error returns Msg, or the underlying error's text when Msg is empty.
func (e *ConnError) Error() string {
	if e.Msg != "" {
		return e.Msg
	}
	if e.Err != nil {
		return e.Err.Error()
	}
	return "ssh: connection failed"
}

// Unwrap returns Err.
func (e *ConnError) Unwrap() error { return e.Err }

// Stderr is what to write on the shim's stderr: Msg and "\r\n", or ""
// when Msg is empty.
func (e *ConnError) Stderr() string {
	if e.Msg == "" {
		return ""
	}
	return e.Msg + "\r\n"
}

// Message levels, in OpenSSH's order (log.h).
const (
	lvlFatal   = 0
	lvlError   = 1
	lvlInfo    = 2
	lvlVerbose = 3
)

// msgLine is one message with the level OpenSSH logs it at.
type msgLine struct {
	lvl  int
	text string
}

// failure builds a ConnError from leveled lines, keeping those LogLevel
// shows.
func failure(logLevel string, err error, lines ...msgLine) *ConnError {
	return &ConnError{Msg: render(logLevel, lines), Err: err}
}

func render(logLevel string, lines []msgLine) string {
	max := levelOf(logLevel)
	var keep []string
	for _, l := range lines {
		if l.lvl <= max && l.text != "" {
			keep = append(keep, l.text)
		}
	}
	return strings.Join(keep, "\r\n")
}

// Says reports whether ssh, at s's LogLevel, prints a message of level
// ("FATAL", "ERROR", "INFO", ...).
func (s *Settings) Says(level string) bool { return levelOf(level) <= levelOf(s.LogLevel) }

func levelOf(name string) int {
	if n, ok := logLevels[strings.ToUpper(name)]; ok {
		return n
	}
	return lvlInfo
}

func fatalLine(s string) msgLine { return msgLine{lvlFatal, s} }
func errorLine(s string) msgLine { return msgLine{lvlError, s} }

// fatalPacketLine is a line of sshpkt_fatal's: OpenSSH prints it with
// logdie, which logs at INFO whatever level it is given (log.c), so that
// LogLevel ERROR hides it.
func fatalPacketLine(s string) msgLine { return msgLine{lvlInfo, s} }

// prefixed returns a ConnError whose message is inner's (already rendered
// at the inner connection's level) followed by lines at logLevel; it is
// how a failed ProxyJump hop shows through the outer connection.
func prefixed(inner *ConnError, logLevel string, err error, lines ...msgLine) *ConnError {
	outer := render(logLevel, lines)
	var parts []string
	if inner.Msg != "" {
		parts = append(parts, inner.Msg)
	}
	if outer != "" {
		parts = append(parts, outer)
	}
	return &ConnError{Msg: strings.Join(parts, "\r\n"), Err: err}
}

// reporter delivers the non-fatal messages of one Dial to the Notifier,
// filtered by LogLevel, and logs them.
type reporter struct {
	mu    sync.Mutex
	n     Notifier
	level int
	log   logrus.FieldLogger
}

func newReporter(p Prompter, logLevel string, log logrus.FieldLogger) *reporter {
	r := &reporter{level: levelOf(logLevel), log: log}
	if n, ok := p.(Notifier); ok {
		r.n = n
	}
	return r
}

// line reports one OpenSSH log line at lvl ("\r\n" is appended).
func (r *reporter) line(lvl int, text string) {
	if lvl > r.level {
		return
	}
	r.raw(text + "\r\n")
}

// raw reports text verbatim (banners, a ProxyCommand's stderr).
func (r *reporter) raw(text string) {
	r.mu.Lock()
	n := r.n
	r.mu.Unlock()
	if n != nil {
		n.Notify(text)
		return
	}
	r.log.WithField("stderr", text).Info("ssh message")
}

// detach stops delivering to the Notifier (after Dial returns, a
// long-lived ProxyCommand's stderr only goes to the log).
func (r *reporter) detach() {
	r.mu.Lock()
	r.n = nil
	r.mu.Unlock()
}
