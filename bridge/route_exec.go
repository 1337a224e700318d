package bridge

// Route names counted in status that are no entry of the route table.
const (
	routeSFTP     = "sftp"
	routeSCP      = "scp"
	routeFallback = "fallback" // handed to the real binary
)

// routeExec runs the command on the target as ssh would: a session
// channel on the persistent connection, with a PTY for -tt. Every held
// temp dir is written to the target first.
const routeExec = "exec"

var execRoute = route{
	name:  routeExec,
	match: func(*request) bool { return true },
	serve: func(r *request) (int, bool) {
		if r.becomeStep {
			// Its stdin may carry a become password the bridge cannot
			// tell from the rest: the journal keeps none of it.
			r.iv.noStdinCapture = true
		}
		return r.passthrough(nil), true
	},
}
