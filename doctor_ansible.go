package main

import (
	"bufio"
	"fmt"
	"os/exec"
	"regexp"
	"strings"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
)

// ansibleConfigDump runs `ansible-config dump -t connection`: the ssh
// connection plugin's settings as Ansible resolves them here (ansible.cfg
// by Ansible's own search, ANSIBLE_* variables, defaults), each with
// where it came from.
func ansibleConfigDump() (string, error) {
	out, err := exec.Command("ansible-config", "dump", "-t", "connection").Output()
	if err != nil {
		return string(out), fmt.Errorf("ansible-config dump -t connection: %w", err)
	}
	return string(out), nil
}

// dumpLineRE is one setting of `ansible-config dump`: name(origin) = value.
var dumpLineRE = regexp.MustCompile(`^([A-Za-z_]+)\((.*)\) = (.*)$`)

// sshSettings parses the ssh plugin's section of ansibleConfigDump's
// output into name -> value and name -> origin.
func sshSettings(dump string) (values, origins map[string]string) {
	values, origins = map[string]string{}, map[string]string{}
	in := false
	sc := bufio.NewScanner(strings.NewReader(dump))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " ")
		if strings.HasSuffix(line, ":") && !strings.Contains(line, " ") {
			in = line == "ssh:"
			continue
		}
		if m := dumpLineRE.FindStringSubmatch(line); in && m != nil {
			values[m[1]], origins[m[1]] = strings.TrimSpace(m[3]), m[2]
		}
	}
	return values, origins
}

// transferProgs is which of sftp and scp Ansible's ssh plugin may run
// for file transfers, by ssh_transfer_method (or 2.14's scp_if_ssh when
// that is unset).
func transferProgs(method, scpIfSSH string) []string {
	switch strings.ToLower(method) {
	case "piped":
		return nil
	case "sftp":
		return []string{"sftp"}
	case "scp":
		return []string{"scp"}
	case "smart":
		return []string{"sftp", "scp"}
	}
	switch strings.ToLower(scpIfSSH) {
	case "true", "yes", "1", "on":
		return []string{"scp"}
	case "false", "no", "0", "off":
		return []string{"sftp"}
	}
	return []string{"sftp", "scp"}
}

// checkAnsibleExecutables asks Ansible which ssh, sftp and scp it would
// run (ansible-config dump), resolves them with PATH as Ansible's
// subprocess does, and fails unless every one it may run is a shim: a
// transfer through the real sftp or scp keeps modules out of the
// interpreters (pipelining off) and the file transfers out of the
// bridge. Inventory variables (ansible_ssh_executable, …) are not seen.
func checkAnsibleExecutables(env doctorEnv) check {
	c := check{name: "Ansible's executables"}
	dump, err := env.ansibleDump()
	if err != nil {
		c.detail = err.Error()
		c.fix = "install ansible-core, and run doctor where you run ansible-playbook (the same directory and environment)"
		return c
	}
	values, origins := sshSettings(dump)
	if len(values) == 0 {
		c.detail = "ansible-config dump shows no ssh connection settings"
		c.fix = "check that ansible-config on PATH is ansible-core's"
		return c
	}
	progs := append([]string{"ssh"}, transferProgs(values["ssh_transfer_method"], values["scp_if_ssh"])...)
	var good, bad []string
	for _, prog := range progs {
		exe := values[prog+"_executable"]
		if exe == "" || exe == "None" {
			exe = prog
		}
		p := fakessh.LookPathIn(exe, env.path)
		desc := fmt.Sprintf("%s_executable = %s (%s)", prog, exe, origins[prog+"_executable"])
		if p != exe && p != "" {
			desc += " -> " + p
		}
		if fakessh.IsBridgeBinary(p) {
			good = append(good, desc)
		} else {
			bad = append(bad, desc)
		}
	}
	if len(bad) == 0 {
		c.ok = true
		c.detail = "Ansible runs the shims: " + strings.Join(good, "; ")
		return c
	}
	c.detail = "Ansible runs what is not the bridge's: " + strings.Join(bad, "; ")
	c.fix = "point ssh_executable, sftp_executable and scp_executable (ansible.cfg [ssh_connection] or ANSIBLE_*_EXECUTABLE) at the shims, or leave them unset and put the shim directory first on PATH"
	return c
}
