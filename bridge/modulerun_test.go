package bridge

import (
	"testing"

	"github.com/ansible-bridge/ansible-bridge/interp/ansiballz"
)

// TestSecretEnv: a module step's environment goes to a python of its own
// when the task is no_log (or its arguments cannot be read) and when it
// is an async_status poll, which carries its task's environment but not
// its no_log; an ordinary task's stays in the interpreter.
func TestSecretEnv(t *testing.T) {
	env := [][2]string{{"AB_TOKEN", "x"}}
	for _, tc := range []struct {
		module, args string
		env          [][2]string
		want         string
	}{
		{"command", `{"_raw_params": "true", "_ansible_no_log": false}`, env, ""},
		{"command", `{"_raw_params": "true", "_ansible_no_log": true}`, env, slowNoLogEnv},
		{"command", `{"_raw_params": "true", "_ansible_no_log": true}`, nil, ""},
		{"async_status", `{"jid": "1.2", "_ansible_no_log": false}`, env, slowAsyncEnv},
		{"async_status", `{"jid": "1.2", "_ansible_no_log": false}`, nil, ""},
	} {
		w, err := ansiballz.Parse(wrapperFor(t, tc.module, tc.args))
		if err != nil {
			t.Fatal(err)
		}
		if got := secretEnv(ansibleCmd{env: tc.env}, w); got != tc.want {
			t.Errorf("%s %s env %v: %q, want %q", tc.module, tc.args, tc.env, got, tc.want)
		}
	}
}
