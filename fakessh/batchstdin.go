package fakessh

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// ReasonBatchOpen: sftp runs each command of "-b -" as it reads it, so
// a caller may write the next one once it has seen the last one's
// output. The bridge checks a batch whole before running any of it, and
// hands it back whole to the real sftp when it does not serve it all,
// so it takes only a batch whose writer has closed stdin, of at most
// BatchMax.
const ReasonBatchOpen = "sftp -b - on a stdin still open (a terminal, a socket, or a pipe not closed within 2s) or holding over 512 KiB: the real sftp runs each command as it reads it"

// BatchOpenEnv, "1", is how the C front, which looked at an sftp batch
// on stdin (batchUnserved), says the bridge cannot take it.
const BatchOpenEnv = "ANSIBLE_BRIDGE_BATCH_OPEN"

// batchWait is how long a batch's writer may take to close stdin
// (Ansible writes its batch at once and closes): the C front's
// BATCH_WAIT_MS.
const batchWait = 2 * time.Second

// BatchMax is the most of a batch on stdin the bridge takes: what the
// daemon may hand back to the real sftp, replayed through a pipe (the
// C front's BATCH_MAX).
const BatchMax = 512 << 10

// batchOpenAtStart is BatchOpenEnv as this process found it.
var batchOpenAtStart = os.Getenv(BatchOpenEnv) == "1"

// batchUnserved reports whether sftp's batch on stdin is not the
// bridge's to take: a terminal or a socket, which may always grow, a
// pipe whose writers have not all closed it within batchWait, or more
// than BatchMax of it. A device such as /dev/null ends where it ends.
// Nothing is read.
func batchUnserved() bool {
	if batchOpenAtStart {
		return true
	}
	var st unix.Stat_t
	if err := unix.Fstat(0, &st); err != nil {
		return true
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		at, err := unix.Seek(0, 0, 1)
		return err != nil || st.Size-at > BatchMax
	case unix.S_IFCHR:
		_, err := unix.IoctlGetTermios(0, unix.TCGETS)
		return err == nil
	case unix.S_IFIFO:
		return !pipeDone(0, batchWait, BatchMax)
	}
	return true
}
