package fusefs_test

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/ansible-bridge/ansible-bridge/fusefs"
	"github.com/sirupsen/logrus"
)

// daemonSource stands for the daemon, which implements fusefs.Source.
type daemonSource struct{ fusefs.Source }

// Example shows how `ansible-bridge mount DIR` or the daemon wires the
// debug view: mount where FUSE is available, unmount on the way out.
func Example() {
	log := logrus.New()
	if err := fusefs.Available(); err != nil {
		log.Warnf("no debug view: %v", err) // one line, e.g. no /dev/fuse
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m, err := fusefs.Mount(ctx, "/run/user/1000/ansible-bridge/view", daemonSource{}, log)
	if err != nil {
		log.Error(err)
		return
	}
	defer m.Unmount()
	<-ctx.Done()
}
