package journal_test

import (
	"fmt"

	"github.com/ansible-bridge/ansible-bridge/bridge/journal"
)

func Example() {
	j := journal.New(100)
	j.AddSecret([]byte("s3cret")) // e.g. the become password typed at sudo's prompt

	e := j.Begin("alice@web1:22", "exec", []string{"ssh", "web1", "/bin/sh -c 'sudo -S true'"})
	fmt.Fprint(e.Stdin(), "s3cret\n")
	e.MarkRemoteStart()
	fmt.Fprint(e.Stderr(), "[sudo] password for alice: ")
	e.Finish(0)

	v, _ := j.Get(e.Seq())
	fmt.Printf("%d %s %s exit=%d\n", v.Seq, v.Target, v.Route, v.Exit)
	fmt.Printf("stdin: %q\n", v.Stdin.Data)
	fmt.Printf("stderr: %q\n", v.Stderr.Data)
	// Output:
	// 1 alice@web1:22 exec exit=0
	// stdin: "********\n"
	// stderr: "[sudo] password for alice: "
}
