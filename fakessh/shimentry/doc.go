// Package shimentry runs the shim from an init function when the binary
// is invoked as ssh, scp or sftp, and never returns in that case.
//
// Ansible starts the shim several times per task, and every start of a Go
// binary first initializes every package linked in. Go initializes
// packages in import-path order, each once its imports are (the Go spec,
// "Package initialization"). This package imports only fakessh, so its
// init runs as soon as fakessh's dependencies are ready, and before the
// daemon's packages that sort after it: go-fuse, golang.org/x/crypto,
// ssh_config, logrus, pkg/sftp and the bridge itself. Their
// initialization (pipes and fd 3 for go-fuse, algorithm tables for
// x/crypto) was a fifth of a shim's CPU time; a shim never needs it.
package shimentry
