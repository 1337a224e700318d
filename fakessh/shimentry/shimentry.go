package shimentry

import (
	"os"
	"path/filepath"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
)

// Argv0Env overrides the program name, for tests and for the daemon the
// shim starts (it must not be mistaken for an ssh).
const Argv0Env = "ANSIBLE_BRIDGE_ARGV0"

// Names are the programs the binary stands in for.
var Names = []string{"ssh", "scp", "sftp"}

// Prog is the name the binary was invoked as (Argv0Env, which is then
// removed from the environment, or the base name of argv[0]).
var Prog = progName()

func progName() string {
	if p := os.Getenv(Argv0Env); p != "" {
		os.Unsetenv(Argv0Env)
		return p
	}
	return filepath.Base(os.Args[0])
}

func init() {
	for _, name := range Names {
		if Prog == name {
			os.Exit(fakessh.Main(Prog, os.Args[1:]))
		}
	}
}
