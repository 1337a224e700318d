package sshclient_test

import (
	"fmt"

	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
	"github.com/ansible-bridge/ansible-bridge/fakessh"
)

// Resolve applies the command line first, then ssh_config ("-F none" here),
// then OpenSSH's defaults.
func ExampleResolve() {
	inv := &fakessh.SSHInvocation{
		Host:       "Web1",
		ConfigFile: "none",
		Options: []fakessh.Option{
			{Key: "port", Value: "2222"},
			{Key: "user", Value: "deploy"},
			{Key: "stricthostkeychecking", Value: "accept-new"},
			{Key: "proxycommand", Value: "nc %h %p"},
		},
	}
	s, err := sshclient.Resolve(inv, sshclient.Env{Home: "/home/alice", User: "alice", Cwd: "/home/alice"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.User, s.HostName, s.Port, s.StrictHostKeyChecking)
	fmt.Println(s.ProxyCommand)
	fmt.Println(s.UserKnownHostsFiles)
	// Output:
	// deploy web1 2222 accept-new
	// nc web1 2222
	// [/home/alice/.ssh/known_hosts /home/alice/.ssh/known_hosts2]
}
