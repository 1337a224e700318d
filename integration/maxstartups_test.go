package integration

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// droppedLogin is what ssh prints (as runSSH has it) when sshd drops its
// connection before the banners (MaxStartups): which of the two depends
// on whether sshd closed before or after ssh's banner reached it, for ssh
// as for the bridge.
var droppedLogin = regexp.MustCompile(`\Akex_exchange_identification: (Connection closed by remote host\nConnection closed|read: Connection reset by peer\nConnection reset) by 127\.0\.0\.1 port N\z`)

// TestMaxStartupsLikeOpenSSH: a login that sshd drops past MaxStartups
// fails through the shim as it fails with OpenSSH (exit 255, the same
// message, no ControlPersist master left), whether ssh would connect on
// its own or make a master; once sshd has room, the same command logs in.
func TestMaxStartupsLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	port := startSSHD(t, filepath.Join(suite.lab.Dir, "ssh_host_ed25519_key"), "MaxStartups 1\n")
	portNum, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		master bool
	}{{"no Control options", false}, {"ControlMaster auto", true}} {
		t.Run(tc.name, func(t *testing.T) {
			d := newPrivateDaemon(t)
			dir := t.TempDir()
			for _, sd := range []side{stock, bridge} {
				var opts []string
				if tc.master {
					opts = []string{"-o", "ControlMaster=auto", "-o", "ControlPersist=30", "-o", "ControlPath=" + filepath.Join(dir, string(sd))}
				}
				before, _ := d.status(t)
				held := holdStartup(t, port)
				_, msg, rc := runSSH(sshCmd(context.Background(), sd, d, portNum, opts, "true"))
				if rc != 255 || !droppedLogin.MatchString(msg) {
					t.Errorf("%s, past MaxStartups: exit %d, stderr %q; want 255 and ssh's message for a dropped login", sd, rc, msg)
				}
				if tc.master {
					if _, err := os.Lstat(filepath.Join(dir, string(sd))); !os.IsNotExist(err) {
						t.Errorf("%s: a dropped login left its ControlPath (%v)", sd, err)
					}
				}
				if sd == bridge && tc.master {
					// The bridge dialled (and failed) itself, rather than
					// handing the call to the real ssh.
					after := d.mustStatus(t)
					if after.NoTarget["not connected"] != before.NoTarget["not connected"]+1 || len(after.Fallbacks) != len(before.Fallbacks) {
						t.Errorf("the bridge did not serve the dropped login itself: no_target %v, fallbacks %v", after.NoTarget, after.Fallbacks)
					}
				}
				held.Close()
				// sshd has room again once it has seen the held
				// connection end: until then a login may still be dropped.
				waitFor(t, 30*time.Second, string(sd)+" to log in once sshd has room", func() bool {
					_, msg, rc := runSSH(sshCmd(context.Background(), sd, d, portNum, opts, "true"))
					if rc != 0 && !droppedLogin.MatchString(msg) {
						t.Fatalf("%s, within MaxStartups: exit %d, stderr %q", sd, rc, msg)
					}
					return rc == 0
				})
				if tc.master {
					runSSH(sshCmd(context.Background(), sd, d, portNum, append(opts, "-O", "exit"), "true"))
				}
			}
		})
	}
}

// holdStartup opens a connection to port that sshd counts against
// MaxStartups: sshd's banner read (sshd counts a connection from its
// fork, which sends it), the client's sent, nothing more. Closing the
// previous one frees sshd's slot only once sshd sees it end, so a
// connection dropped meanwhile is tried again.
func holdStartup(t *testing.T, port string) net.Conn {
	t.Helper()
	var held net.Conn
	waitFor(t, 30*time.Second, "a connection sshd counts as starting", func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
			t.Fatal(err)
		}
		banner, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || !strings.HasPrefix(banner, "SSH-2.0-") {
			c.Close()
			return false
		}
		if _, err := c.Write([]byte("SSH-2.0-held\r\n")); err != nil {
			c.Close()
			return false
		}
		held = c
		return true
	})
	t.Cleanup(func() { held.Close() })
	return held
}
