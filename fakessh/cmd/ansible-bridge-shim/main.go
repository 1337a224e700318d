// Command ansible-bridge-shim is the shim alone: ssh, scp and sftp as
// `ansible-bridge shims DIR` links them when this binary sits next to
// ansible-bridge (make build and make install put it there). It links only
// package fakessh, so it starts faster than the full binary, which carries
// the daemon, go-fuse and x/crypto: Ansible starts it once per step, about
// six times per task without pipelining. It starts the daemon as the
// ansible-bridge binary in its own directory.
package main

import (
	"fmt"
	"os"

	// Runs the shim from its init when invoked as ssh, scp or sftp.
	_ "github.com/ansible-bridge/ansible-bridge/fakessh/shimentry"
)

func main() {
	fmt.Fprintln(os.Stderr, "ansible-bridge-shim: run it as ssh, scp or sftp (links that `ansible-bridge shims DIR` makes)")
	os.Exit(2)
}
