// Package shimentry runs the shim from an init function when the binary
// is invoked as ssh, scp or sftp, and never returns in that case.
//
// Ansible starts the shim several times per task, and every start of a Go
// binary first initializes every package linked in. Go initializes
// packages in import-path order, each once its imports are (the Go spec,
// "Package initialization"). This package imports only fakessh, so its
// init runs as soon as fakessh's dependencies are ready, before most of
// the daemon's packages: go-fuse's fuse and fs (fd 3 and a table of
// opcodes), golang.org/x/crypto/ssh, pkg/sftp and the bridge itself
// (TestShimSkipsDaemonInit in the main package checks). A few that are
// ready earlier (go-fuse's splice, logrus, ssh_config) still run first.
// What is skipped was ~0.2 ms of a shim's ~1.8 ms of CPU.
package shimentry
