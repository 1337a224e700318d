package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// dump is ansible-config dump -t connection's ssh section (2.14) with the
// given executables and transfer method ("" for the defaults).
func dump(ssh, sftp, scp, method string) string {
	line := func(k, v, def string) string {
		origin := "/project/ansible.cfg"
		if v == "" {
			v, origin = def, "default"
		}
		return k + "(" + origin + ") = " + v + "\n"
	}
	return "\nlocal:\n_____\npipelining(default) = False\n\nssh:\n___\n" +
		"control_path_dir(default) = ~/.ansible/cp\n" +
		line("scp_executable", scp, "scp") + "scp_if_ssh(default) = smart\n" +
		line("sftp_executable", sftp, "sftp") + line("ssh_executable", ssh, "ssh") +
		line("ssh_transfer_method", method, "None") + "use_tty(default) = True\n"
}

func TestDoctorAnsibleExecutables(t *testing.T) {
	for _, tc := range []struct {
		name           string
		shimsFirst     bool
		ssh, sftp, scp string // "shim", "real" or "" (unset)
		method         string
		ok             bool
		detail         string
	}{
		{"PATH", true, "", "", "", "", true, "sftp_executable = sftp (default) -> "},
		{"PATH, real sftp in ansible.cfg", true, "", "real", "", "", false, "sftp_executable = "},
		{"PATH, real sftp, piped", true, "", "real", "", "piped", true, ""},
		{"ansible.cfg, all three", false, "shim", "shim", "shim", "", true, ""},
		{"ansible.cfg, ssh only", false, "shim", "", "", "", false, "scp_executable = scp (default)"},
		{"ansible.cfg, ssh and sftp, method sftp", false, "shim", "shim", "", "sftp", true, ""},
		{"ansible.cfg, ssh and sftp, smart", false, "shim", "shim", "", "smart", false, "scp_executable"},
		{"nothing", false, "", "", "", "", false, "ssh_executable = ssh (default)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := doctorFixture(t, tc.shimsFirst)
			dirs := strings.Split(env.path, ":")
			real, shims := dirs[0], dirs[1]
			if tc.shimsFirst {
				real, shims = shims, real
			}
			exe := func(which, prog string) string {
				switch which {
				case "shim":
					return filepath.Join(shims, prog)
				case "real":
					return filepath.Join(real, prog)
				}
				return ""
			}
			d := dump(exe(tc.ssh, "ssh"), exe(tc.sftp, "sftp"), exe(tc.scp, "scp"), tc.method)
			env.ansibleDump = func() (string, error) { return d, nil }
			c := doctorResult(runDoctor(env), "Ansible's executables")
			if c.ok != tc.ok || !strings.Contains(c.detail, tc.detail) || !c.ok && c.fix == "" {
				t.Errorf("%+v\ndump:\n%s", c, d)
			}
		})
	}
	t.Run("no ansible-config", func(t *testing.T) {
		env := doctorFixture(t, true)
		env.ansibleDump = func() (string, error) { return "", errors.New("exec: \"ansible-config\": not found") }
		if c := doctorResult(runDoctor(env), "Ansible's executables"); c.ok || !strings.Contains(c.detail, "not found") {
			t.Errorf("%+v", c)
		}
	})
}
