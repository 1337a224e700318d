// Package integration holds ansible-bridge's end-to-end tests: real sshd on
// loopback, real ansible-playbook, the real binary installed as ssh/scp/sftp
// shims, compared with stock OpenSSH.
//
// # Running
//
// The tests need root, a Debian 12 machine with the packages from
// scripts/setup.sh, and the loopback lab from scripts/lab.sh:
//
//	scripts/setup.sh                 # once: apt packages
//	scripts/lab.sh up                # users abtest/abpw/abnopy, sshd on 127.0.0.1:2222
//	eval "$(scripts/lab.sh env)"     # AB_LAB, AB_PORT, AB_KEY, ...
//	go test -timeout 60m ./integration/
//	scripts/lab.sh down
//
// or simply `make test`, which does all of that. Without AB_LAB, or without
// ansible-playbook or sshd, or when not root, every test skips and says why.
//
// Useful knobs:
//
//	go test ./integration/ -run 'TestCorpus/files/pipelining=false/scp' -v
//	AB_COMPARE=stock go test ./integration/  # stock against stock: checks
//	                                         # that normalization hides all
//	                                         # run-to-run noise; no binary needed
//	AB_KEEP=1 go test ./integration/         # keep the work directory
//
// When a test fails, the suite keeps its work directory anyway and, after
// the last test, repeats each failed playbook run (test, exit status, run
// directory, the end of its stdout): CI shows only the head and tail of a
// long -v log. `.ci/run` also leaves its whole log in
// /var/tmp/ansible-bridge-ci.log on the machine it ran on.
//
// # What a test does
//
// TestMain builds the module root once (go build -o $tmp/ansible-bridge ..),
// runs `ansible-bridge shims $tmp/shims`, and points ANSIBLE_BRIDGE_SOCKET and
// ANSIBLE_BRIDGE_LOG into the work directory so that the tests use a private
// daemon, which is stopped with `ansible-bridge stop` at the end.
//
// Every playbook in corpus/ runs twice per setting, once stock (the real
// /usr/bin/ssh) and once through the bridge (PATH starts with the shims),
// in all six combinations of ANSIBLE_PIPELINING (true, false) and
// ANSIBLE_SSH_TRANSFER_METHOD (sftp, scp, piped); those whose subject is
// not transfers (async, discovery, monkeypatch*, environment) in the two
// with sftp only, for CI's time. Each run gets a fresh
// inventory, a fresh ControlPath directory (stock masters are sent
// `ssh -O exit` afterwards, so none leaks into the next run) and empty output
// directories on the target (/home/abtest/out, /home/abpw/out) and on the
// controller. The two runs must agree on:
//
//   - the exit status of ansible-playbook and the recap stats;
//   - every task result, recorded by the corpus/plugins/callback/abjson
//     stdout callback (ansible-core ships no JSON callback) and normalized:
//     timings, temp directory names, async job ids and facts that change
//     from run to run are masked, everything else (rc, stdout, stderr,
//     changed, failed, msg, diffs, loop results, checksums, stat fields) is
//     compared;
//   - the files the playbooks leave on the target and the controller
//     (relative path, type, mode, size, sha256, owner and group);
//   - ansible-playbook's stderr (warnings), normalized the same way.
//
// A bridge run must also be served by the bridge: the test fails if a shim
// fell back to the real binary (the shim log next to the socket; Ansible's
// `ssh -o ControlPersist` probe excepted) or if a ControlPersist master
// appeared in the run's ControlPath directory. Otherwise equal results would
// prove nothing.
//
// Each playbook also has assertions of its own (expected stdout, which tasks
// fail, which hosts are unreachable), applied to both runs, so that a
// regression shared by stock and bridge still fails.
//
// TestConnectionCount puts a counting TCP relay (package relay) in front of
// sshd and checks that a bridge run opens exactly one connection to the
// target, and two when the playbook has a `meta: reset_connection`.
// TestFallback passes an option the bridge cannot honour (ForwardAgent=yes)
// and checks that the shim falls back to the real ssh with identical results.
//
// The fault and scale tests (faults_test.go, playbooks corpus/faults-*.yml)
// each use a daemon of their own and wait only for conditions (a file a
// task touches, the daemon's status), never for a duration:
//
//   - TestDaemonKilledMidRun: kill -9 of the daemon while a loop item runs
//     costs that item only; the next ones run on a fresh daemon, and the
//     killed one's interpreters leave the target.
//   - TestSSHDFaults: the sshd session serving a task killed, and the
//     target's sshd restarted with every session, compared with stock.
//   - TestStalledNetwork: a relay that goes silent (relay.Stall) with
//     ServerAliveInterval or ConnectTimeout ends the shim as it ends the
//     real ssh (exit 255, the same message); a stall that ends is survived.
//   - TestConcurrentRuns: three runs at once through one daemon, each equal
//     to the same run with stock.
//   - TestLargeCopy: 64 MiB copied and fetched intact; the daemon killed
//     during the upload or the module that writes it out leaves the
//     destination absent or whole, and the next run completes it.
//   - TestFleet: 50 hosts (127.0.0.2–51, a relay each), forks=50: one TCP
//     connection per host; the daemon's RSS and fds at the peak per
//     connected target (at most 1 MiB and 4); once the connections have
//     closed and the daemon has returned its memory, its fds and threads
//     as at the start, its Go heap at most 32 KiB a host above the start's,
//     no decoded module zip kept, and at most a third of the RSS the run
//     took still held.
//   - TestOtherUIDRefused, TestDaemonSurvivesGarbage,
//     TestNoPasswordInStatusOrProcesses: another uid gets nothing (its
//     shim runs the real ssh; its Hello is refused by SO_PEERCRED), 200
//     random blobs and malformed frames leave the daemon up, and no
//     password is in status or in any process's argv or environment.
//
// Longer checks are outside `make test`: `make soak` (scripts/soak) runs
// 10,000 loop items and watches the daemon's RSS, fds and threads and the
// target's processes; `make fuzz` runs the fuzz targets for a bounded time
// (.ci/run runs it before the tests).
//
// The output directories are fixed paths (results name them), so a run
// holds an flock on $AB_LAB/integration.lock: a second `go test` on the same
// machine waits instead of clearing the first one's files.
//
// # Corpus
//
//   - basics.yml: command, shell, raw, script, environment, loops,
//     delegate_to localhost, gather_facts, reset_connection, check mode, and
//     a failing last task.
//   - files.yml: copy (empty, 1 byte, 5 MiB binary, unicode and spaces,
//     mode, trees, remote_src), template, fetch, file, stat, lineinfile,
//     slurp, check and diff mode.
//   - async.yml: async with poll, fire-and-forget with async_status, and
//     async under become.
//   - become.yml: sudo without and with a password, sudo and su with a wrong
//     password, su with a password, become_user nobody.
//   - password.yml: password logins through sshpass (ansible_password),
//     right and wrong.
//   - discovery.yml: interpreter discovery (no ansible_python_interpreter).
//   - unreachable.yml: a closed port and a key the target refuses.
//   - monkeypatch.yml: library/ab_patch.py (a custom module next to the
//     playbooks, with module_utils/ab_state.py) monkey-patches os.getcwd,
//     json.dumps and time.time and leaves other marks (builtins, module
//     attributes, an AnsibleModule class attribute, sys.path, os.environ, a
//     module_utils list) in its process; every later task, of the same
//     module, in a loop, under become, or library/ab_probe.py, must start
//     clean, as in stock's fresh python per task.
//   - monkeypatch-at-import.yml: library/ab_patch_at_import.py patches at
//     its top level; each task must see that top level run exactly once.
//   - freshness.yml (TestFreshness, two modes only): library/ab_zzstate.py
//     imports ab_zzstate from /usr/local's site directory, which the play
//     rewrites (1, 22), removes and rewrites (333) between tasks: each task
//     sees it as it is; then the file module's error paths (touch in a
//     missing directory, state=file on a missing path, hard link to a
//     missing source), which 2.14 reports from its sys.excepthook.
//   - environment.yml: a task with become adds a line to /etc/environment
//     (the test backs the file up and restores it; setupEnvironment). Stock
//     shows it to the login user only on a new connection (after
//     meta: reset_connection), never under sudo; the bridge must agree.
//   - become-policy.yml (TestBecomePolicyChange): sudoers changes
//     between become steps, written by a become step, by raw, and edited
//     in place in /etc/sudoers.d (which only root can read); the step
//     after a rule that asks for a password fails with "Missing sudo
//     password" in both runs. Its user abpolicy is the test's own.
//   - become-flags.yml (TestBecomeFlags): after a plain become step,
//     become_flags sudo refuses with its usage (a second -u, -i with -E)
//     fail in both runs, and -g runs with the group; the bridge passes
//     the refused ones through and counts them in status.
//   - shellrc.yml (TestShellRCChange): the zoo's bash and tcsh users'
//     ~/.bashrc and ~/.tcshrc gain an export and a umask mid-play; the
//     next steps see both, as stock's next commands do.
//   - nopython.yml: the lab's user abnopy, whom sshd chroots into a tree
//     with dash, a few tools and sftp-server but no python: raw and script
//     work, modules fail with MODULE FAILURE and "/bin/sh: 1:
//     /usr/bin/python3: not found", discovery warns and falls back to
//     /usr/bin/python. Those hosts use a known_hosts file with the lab's
//     host key (see setupNoPython). Skips when the lab predates abnopy.
//   - zoo.yml (TestTargetZoo): the same few steps on every target the lab's
//     zoo has, in one play: login shells bash, dash, BusyBox sh, tcsh
//     (ansible_shell_type=csh) and fish, pyenv's Pythons 2.7 and 3.6–3.13
//     (through a wrapper per version: /root is not readable by the lab's
//     users), a remote tmp on a noexec mount; on 2.14 and the newest
//     ansible-core, both main modes. Unsupported combinations fail, and
//     must fail as stock's do.
//
// Without setfacl on the target (scripts/setup.sh does not install acl),
// stock Ansible fails `become_user: nobody` when pipelining is off. The
// corpus keeps that task, with ignore_errors, and the test expects it to fail
// in both runs in that setting.
//
// Package integration/newcomer runs the README's own commands from a fresh
// clone (setup, the demo with its port taken and with a sudoers file that
// does not parse, make install, env) and checks the failures are clear and
// come before anything is created; it uses a lab of its own settings and
// creates none.
package integration
