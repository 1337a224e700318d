package bridge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoUsableSFTP: a target whose sftp subsystem is refused (no
// `Subsystem sftp`) or broken by output before it (a chatty ~/.bashrc).
// dd of= runs as the command it is, as stock's does; scp and sftp say
// what OpenSSH's say; the connection asks for the subsystem once.
func TestNoUsableSFTP(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refused bool
		noise   string
		scp     string
		sftp    string
	}{
		{name: "refused", refused: true, scp: "scp: Connection closed\r\n", sftp: "Connection closed\r\n"},
		{name: "output", noise: "forced\n",
			scp: "scp: Received message too long 1718579811\r\n" +
				"scp: Ensure the remote shell produces no output for non-interactive sessions.\r\n",
			sftp: "Received message too long 1718579811\r\n" +
				"Ensure the remote shell produces no output for non-interactive sessions.\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 0)
			h.ts.sftpRefused.Store(tc.refused)
			h.ts.sftpNoise.Store(tc.noise)
			dir := t.TempDir()
			local := filepath.Join(dir, "src")
			if err := os.WriteFile(local, []byte("data\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				dst := filepath.Join(dir, "dd"+string(rune('0'+i)))
				r := h.run("ssh", h.sshArgs("127.0.0.1", "dd of="+dst+" bs=65536"), "hello\n")
				if r.code != 0 || r.fallback != "" || !strings.Contains(r.stderr, "records out") {
					t.Fatalf("dd %d: %+v", i, r)
				}
				assertFile(t, dst, []byte("hello\n"), 0o644)
			}
			// A wrapper dd writes into Ansible's temp dir is noted, as
			// one uploaded through SFTP is: the module runs from memory.
			base := filepath.Join(dir, "tmp")
			name := "ansible-tmp-1795258799.4656882-10032-110163520341080"
			tmp := filepath.Join(base, name)
			mkdir := `/bin/sh -c '( umask 77 && mkdir -p "` + "` echo " + base + " `" + `"&& mkdir "` + "` echo " + tmp + " `" + `" && echo ` + name + `="` + "` echo " + tmp + " `" + `" ) && sleep 0'`
			if r := h.run("ssh", h.sshArgs("127.0.0.1", mkdir), ""); r.code != 0 {
				t.Fatalf("mkdir: %+v", r)
			}
			wrapper := filepath.Join(tmp, "AnsiballZ_ping.py")
			if r := h.run("ssh", h.sshArgs("127.0.0.1", "dd of="+wrapper+" bs=65536"), "#!/usr/bin/python3\n"); r.code != 0 {
				t.Fatalf("dd into the temp dir: %+v", r)
			}
			tg := h.srv.targets.all()[0]
			if st, n := tg.house.lookup(wrapper); st == nil {
				t.Errorf("temp dir %s not known", tmp)
			} else if f, ok := st.file(n); !ok || string(f.data) != "#!/usr/bin/python3\n" {
				t.Errorf("the wrapper dd wrote is not noted: %v %+v", ok, f)
			}
			r := h.run("scp", h.sshArgs(local, "[127.0.0.1]:"+filepath.Join(dir, "scp")), "")
			if r.code != 255 || r.fallback != "" || r.stderr != tc.scp {
				t.Fatalf("scp: %+v", r)
			}
			r = h.run("sftp", append([]string{"-b", "-"}, h.sshArgs("127.0.0.1")...), "put "+local+" "+filepath.Join(dir, "sftp")+"\n")
			if r.code != 255 || r.fallback != "" || r.stderr != tc.sftp {
				t.Fatalf("sftp: %+v", r)
			}
			if n := h.ts.sftpAsked.Load(); n != 1 {
				t.Errorf("sftp subsystem asked for %d times on one connection, want 1", n)
			}
			if n := h.ts.conns.Load(); n != 1 {
				t.Errorf("%d TCP connections, want 1", n)
			}
			// dd never asks for sftp: without an interpreter up, it runs
			// in a session of its own.
			st := h.srv.Status()
			if slow := st.Targets[0].Slow[slowDDNoInterpreter]; slow != 3 {
				t.Errorf("status slow %v: want the 3 dd runs counted", st.Targets[0].Slow)
			}
		})
	}
}
