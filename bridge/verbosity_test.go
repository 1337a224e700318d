package bridge

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
)

func TestRaiseVerbosity(t *testing.T) {
	for _, tc := range []struct {
		v     int
		debug bool
	}{{0, false}, {1, true}, {3, true}} {
		var buf bytes.Buffer
		l := logrus.New()
		l.SetOutput(&buf)
		l.SetLevel(logrus.InfoLevel)
		iv := &invocation{log: l.WithField("session", 7)}
		iv.raiseVerbosity(tc.v)
		iv.log.Debug("dbg-line")
		l.Debug("daemon-debug")
		out := buf.String()
		if strings.Contains(out, "dbg-line") != tc.debug {
			t.Errorf("-v×%d: log %q", tc.v, out)
		}
		if strings.Contains(out, "daemon-debug") {
			t.Errorf("-v×%d raised the daemon's own level", tc.v)
		}
		if tc.debug && !strings.Contains(out, "session=7") {
			t.Errorf("-v×%d lost the invocation's fields: %q", tc.v, out)
		}
	}
}
