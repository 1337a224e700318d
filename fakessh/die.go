package fakessh

import (
	"syscall"
	"unsafe"
)

// IgnoredSignalsEnv ("QUIT", "TERM" or both, space-separated) tells the
// Go shim which of those its caller left ignored: the C front, which saw
// them before handing over, sets it. Go's runtime takes SIGQUIT and
// SIGTERM over before main, so the shim cannot see that itself.
const IgnoredSignalsEnv = "ANSIBLE_BRIDGE_IGNORED_SIGNALS"

// kernelSigaction is struct sigaction as rt_sigaction takes it on Linux
// (amd64 and arm64 alike).
type kernelSigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

// dieOf ends the process by sig under its default action, as ssh, scp
// and sftp die of a signal they do not catch: the caller sees the signal
// (a shell's "Quit", status 131), not an exit code. Go cannot restore a
// default action itself (signal.Reset gives back the runtime's own).
func dieOf(sig syscall.Signal) {
	var dfl kernelSigaction // SIG_DFL
	_, _, _ = syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
	_ = syscall.Kill(syscall.Getpid(), sig)
	select {} // until the signal ends the process
}
