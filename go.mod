module github.com/ansible-bridge/ansible-bridge

go 1.26.0

require (
	github.com/creack/pty v1.1.24
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/kballard/go-shellquote v0.0.0-20180428030007-95032a82bc51
	github.com/pkg/sftp v1.13.12
	github.com/sirupsen/logrus v1.10.2
	golang.org/x/crypto v0.58.0
	golang.org/x/sys v0.49.0
	golang.org/x/term v0.47.0
)

require github.com/kr/fs v0.1.0 // indirect
