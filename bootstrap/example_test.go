package bootstrap_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ansible-bridge/ansible-bridge/bootstrap"
	"github.com/ansible-bridge/ansible-bridge/interp"
	"github.com/sirupsen/logrus"
)

// Start an agent with the local python and run a command through it.
func ExampleStart() {
	log := logrus.New()
	log.SetOutput(os.Stderr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := bootstrap.Start(ctx, bootstrap.LocalRunner{}, "/usr/bin/python3", log)
	if err != nil {
		fmt.Println(err) // the target stays on passthrough
		return
	}
	defer c.Close()
	var out strings.Builder
	code, err := c.Exec(ctx, interp.ExecRequest{Command: "echo hello from $0", Stdout: &out})
	fmt.Print(out.String())
	fmt.Println(code, err)
	// Output:
	// hello from /bin/sh
	// 0 <nil>
}
