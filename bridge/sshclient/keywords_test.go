package sshclient

import (
	"reflect"
	"testing"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/fakessh/sshconf"
)

// sampleValue is a valid value for a keyword that differs from OpenSSH's
// default, or "" when the test must name one itself.
func sampleValue(name string, kw sshconf.Keyword) string {
	if v, ok := map[string]string{
		"pubkeyauthentication":         "no",
		"passwordauthentication":       "no",
		"kbdinteractiveauthentication": "no",
		"addressfamily":                "inet",
		"loglevel":                     "DEBUG3",
		"stricthostkeychecking":        "no",
		"proxyjump":                    "jumper",
		"ciphers":                      "aes128-ctr",
		"macs":                         "hmac-sha2-256",
		"kexalgorithms":                "curve25519-sha256",
		"hostkeyalgorithms":            "ssh-ed25519",
		"sendenv":                      "LANG",
		"updatehostkeys":               "no",
		"tcpkeepalive":                 "no",
		"proxyusefdpass":               "no", // yes: the shim falls back
		"addkeystoagent":               "confirm 5m",
	}[name]; ok {
		return v
	}
	switch kw.Kind {
	case sshconf.Multi:
		return "yes"
	case sshconf.Int:
		return "7"
	case sshconf.Time, sshconf.Persist:
		return "13"
	case sshconf.Port:
		return "2200"
	case sshconf.Command:
		return "nc %h %p"
	case sshconf.SetEnv:
		return "A=b"
	case sshconf.Escape:
		return "^]"
	case sshconf.ForwardAgent:
		return "no"
	}
	return "sample"
}

// TestKeywordTable: a keyword the table marks Served changes the settings
// the client resolves; one it does not is accepted and changes nothing
// but, for some values, whether the invocation falls back.
// Serving a new ssh option means changing both sides, and this test keeps
// them in step.
func TestKeywordTable(t *testing.T) {
	noSystemConfig(t)
	env := Env{Home: t.TempDir(), User: "me", Cwd: "/"}
	base, err := Resolve(&fakessh.SSHInvocation{Host: "h", ConfigFile: "none"}, env)
	if err != nil {
		t.Fatal(err)
	}
	for name, kw := range sshconf.Keywords {
		if _, alias := sshconf.Aliases[name]; alias {
			continue // the same setting as its target
		}
		v := sampleValue(name, kw)
		s, err := Resolve(&fakessh.SSHInvocation{Host: "h", ConfigFile: "none", Options: []fakessh.Option{{Key: name, Value: v}}}, env)
		if err != nil {
			t.Errorf("%s %s: %v", name, v, err)
			continue
		}
		changed := !reflect.DeepEqual(s, base)
		if !kw.Served {
			// An unserved keyword may make the invocation fall back
			// (KbdInteractiveDevices, whatever its value), and
			// change nothing else.
			fellBack := *s
			fellBack.Unsupported = base.Unsupported
			changed = !reflect.DeepEqual(&fellBack, base)
		}
		switch {
		case kw.Served && !changed:
			t.Errorf("%s is Served, but %s %s changes no setting", name, name, v)
		case !kw.Served && changed:
			t.Errorf("%s is not Served (%q), but %s %s changes the settings", name, kw.Reason, name, v)
		case !kw.Served && kw.Reason == "":
			t.Errorf("%s is neither Served nor has a Reason", name)
		}
	}
}
