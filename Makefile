# ansible-bridge. Targets:
#
#   make build   bin/ansible-bridge and bin/ansible-bridge-shim
#   make install PREFIX=~/.local   both into PREFIX/bin, and the ssh, scp and
#                sftp shims into PREFIX/share/ansible-bridge/bin
#   make unit    go test ./... without the lab (end-to-end tests skip)
#   make test    what CI runs: setup, lint, fuzz, then the loopback lab up,
#                every test including end-to-end, lab down
#   make lint    gofmt, go vet, staticcheck, deadcode -test; the agent's Python: py_compile
#                on every Python 3.6+ here, pyflakes3 (Debian's pyflakes3)
#   make cover   coverage of ./bridge/... without the lab, per package and
#                in total (profile in COVERPROFILE, default
#                $TMPDIR/ansible-bridge-cover.out; go tool cover -html=...)
#   make fuzz    every Fuzz target for FUZZTIME (default 15s) each: the
#                frame decoder, the shim's argv parsers, the become and
#                AnsiballZ parsers (~2 minutes; .ci/run runs it)
#   make soak    SOAK_ITEMS (default 10000) loop items through the bridge
#                against the lab (scripts/soak), the daemon's RSS, fds and
#                threads every SOAK_EVERY (1000) items; fails if RSS grows
#                over 10 %, threads by more than 2, or fds change after the
#                first report
#   make bench   benchmark runner (scripts/bench): bench.md and bench.svg, the
#                median of 3 interleaved runs per row (stock, bridge, floor,
#                Mitogen), a second table at 20 ms added RTT, and 50 targets
#                at once, and the first task of a cold run; ~22 minutes; needs
#                the lab (scripts/lab.sh up)
#   make demo    stock ssh vs the bridge on a small playbook, timed
#   make setup   the Debian packages (scripts/setup.sh), which make demo and
#                make test run first
#
# make demo and make test need root (the lab's users and sshd); the
# product itself (make build, make install, ansible-bridge env) does not.
#
# ANSIBLE picks the ansible-core (scripts/ansible-versions.sh installs it
# from ../shared/peers into a cache outside the repository):
#   make test ANSIBLE=2.19    the whole suite with 2.19's ansible-playbook
#   make test                 Debian's 2.14 for the suite, and the version
#                             matrix test on every other installable version
#   make bench ANSIBLE=2.22   the bench with 2.22 (bench-2.22.md)
#   make bench ANSIBLE=all    the bench once per version, then
#                             bench-versions.md comparing them

# sudo's secure_path leaves out /usr/local/go/bin, where Go's tarball puts
# go: `sudo make demo` and `sudo make test` find it there too.
GO ?= $(or $(shell command -v go 2>/dev/null),$(wildcard /usr/local/go/bin/go),go)
export GO
# and the tests that run go themselves find it on PATH.
ifneq ($(findstring /,$(GO)),)
export PATH := $(patsubst %/,%,$(dir $(GO))):$(PATH)
endif
# A static binary without symbol tables starts about 1.5 ms sooner, and
# Ansible starts it (as ssh) several times per task.
# The version is git describe's; the revision is stamped too, for when Go
# cannot read it (a git worktree, GOFLAGS=-buildvcs=false).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
BUILDFLAGS ?= -buildvcs=auto -ldflags=-s\ -w\ -X\ main.version=$(VERSION)\ -X\ main.revision=$(REVISION)
# Extra flags for go test, e.g. make test GOTESTFLAGS='-v -run TestCorpus/files'
GOTESTFLAGS ?=
TEST_TIMEOUT ?= 82m
STATICCHECK_VERSION ?= v0.8.2
DEADCODE_VERSION ?= v0.52.0
ANSIBLE ?=
# The chosen version's bin dir, first on PATH ("" for Debian's or all).
ANSIBLE_PATH = $(if $(filter-out all,$(ANSIBLE)),$(shell scripts/ansible-versions.sh bin $(ANSIBLE)):)

.PHONY: setup build install unit agent-test cover test lint lint-python fuzz soak bench demo lab-up lab-down

# The Debian packages the lab, the demo and the tests need: installed (as
# root) where missing, naming them; about a second when all are there.
SETUP ?= scripts/setup.sh
setup:
	@$(SETUP)

# bin/ansible-bridge-shim is the shim alone (fakessh/cmd): it starts faster
# than the full binary. bin/ansible-bridge-front (fakessh/front, C) starts
# ~10 x faster still, serves what the daemon serves and execs the Go shim
# for the rest; `ansible-bridge shims DIR` links to it when both sit next
# to ansible-bridge.
# Linked against musl where musl-gcc is installed (package musl-tools): a
# static glibc binary spends ~0.4 ms of each start in cpuid probes, which
# trap in a VM (internal/cbuild says more).
FRONT_CC ?= $(shell command -v musl-gcc 2>/dev/null || echo $(CC))
FRONT_CFLAGS ?= -O2 -Wall -Wextra -static
build:
	CGO_ENABLED=0 $(GO) build $(BUILDFLAGS) -o bin/ansible-bridge .
	CGO_ENABLED=0 $(GO) build $(BUILDFLAGS) -o bin/ansible-bridge-shim ./fakessh/cmd/ansible-bridge-shim
	$(FRONT_CC) $(FRONT_CFLAGS) -o bin/ansible-bridge-front fakessh/front/front.c

PREFIX ?= $(HOME)/.local
install: build
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 bin/ansible-bridge bin/ansible-bridge-shim bin/ansible-bridge-front $(DESTDIR)$(PREFIX)/bin/
	$(DESTDIR)$(PREFIX)/bin/ansible-bridge shims $(DESTDIR)$(PREFIX)/share/ansible-bridge/bin

# AB_LAB is dropped so that a lab exported in the caller's shell is not used.
unit: agent-test
	env -u AB_LAB $(GO) test -count=1 $(GOTESTFLAGS) ./...

# The agent's Python unit tests (interp/agent_test.py, stdlib unittest) on
# every Python 3 here, as the Go tests of package interp use them.
PYTHONS ?= $(wildcard /usr/bin/python3 $(HOME)/.pyenv/versions/*/bin/python3 /root/.pyenv/versions/*/bin/python3)
agent-test:
	@for py in $(sort $(PYTHONS)); do \
		$$py -c 'import sys; sys.exit(sys.version_info < (3, 6))' 2>/dev/null || continue; \
		echo "agent tests with $$py"; \
		$$py -m unittest discover -s interp -p 'agent_test.py' || exit 1; \
	done

# Coverage of the daemon's packages by the tests that need no lab: go test
# prints each package's figure, the last line the total.
COVERPROFILE ?= $(or $(TMPDIR),/tmp)/ansible-bridge-cover.out
cover:
	env -u AB_LAB $(GO) test -count=1 -coverprofile=$(COVERPROFILE) $(GOTESTFLAGS) ./bridge/...
	@$(GO) tool cover -func=$(COVERPROFILE) | tail -n 1

# The lab goes down even when the tests fail; the tests' exit status is kept.
# End-to-end tests run after the others, not alongside: they edit the
# machine's /etc/environment, which interpreters in unit tests watch.
test: setup lint fuzz agent-test
	scripts/lab.sh up
	@rc=0; \
	eval "$$(scripts/lab.sh env)"; \
	export PATH="$(ANSIBLE_PATH)$$PATH" AB_ANSIBLE="$(ANSIBLE)"; \
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(GOTESTFLAGS) $$($(GO) list ./... | grep -v '/integration$$') || rc=$$?; \
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(GOTESTFLAGS) ./integration/ || rc=$$?; \
	scripts/lab.sh down || true; \
	exit $$rc

lint: lint-python
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt -l:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	@out=$$($(GO) run golang.org/x/tools/cmd/deadcode@$(DEADCODE_VERSION) -test ./...); if [ -n "$$out" ]; then echo "deadcode -test:"; echo "$$out"; exit 1; fi

# The agent runs on the target's python, any 3.6+: each Python here
# compiles it (py_compile, the .pyc into a temporary directory, not the
# tree), then pyflakes3 (scripts/setup.sh installs it) checks for unused
# and undefined names.
PYFILES = $(wildcard interp/*.py)
PYCOMPILE = import os, py_compile, shutil, sys, tempfile; \
	d = tempfile.mkdtemp(); \
	ok = [py_compile.compile(f, cfile=os.path.join(d, str(i) + ".pyc"), doraise=False) for i, f in enumerate(sys.argv[1:])]; \
	shutil.rmtree(d); \
	sys.exit(None in ok)
lint-python:
	@for py in $(sort $(PYTHONS)); do \
		$$py -c 'import sys; sys.exit(sys.version_info < (3, 6))' 2>/dev/null || continue; \
		echo "py_compile with $$py: $(PYFILES)"; \
		$$py -c '$(PYCOMPILE)' $(PYFILES) || exit 1; \
	done
	@command -v pyflakes3 >/dev/null || { echo "make lint: pyflakes3 not found: apt-get install pyflakes3 (scripts/setup.sh installs it)" >&2; exit 1; }
	pyflakes3 $(PYFILES)

# One go test per target: -fuzz takes a single target.
FUZZTIME ?= 15s
FUZZ_TARGETS = ./fakessh/wire:FuzzRead ./fakessh:FuzzParseSSH ./fakessh:FuzzParseSCP \
	./fakessh:FuzzParseSFTP ./fakessh:FuzzParseSFTPBatch ./bridge/become:FuzzParse \
	./interp/ansiballz:FuzzParse
# Go 1.26's fuzz coordinator can fail a target with a bare "context
# deadline exceeded" when -fuzztime ends while a worker is busy (a loaded
# machine; golang/go#75804, fixed in Go 1.27). Such a run, with no failing
# input written, runs once more; any other failure fails at once.
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		for try in 1 2; do \
			echo "fuzz $$t for $(FUZZTIME)"; \
			if out=$$($(GO) test -run='^$$' -fuzz="^$${t#*:}$$" -fuzztime=$(FUZZTIME) "$${t%%:*}" 2>&1); then echo "$$out"; break; fi; \
			echo "$$out"; \
			if [ $$try = 1 ] && echo "$$out" | grep -q 'context deadline exceeded' && ! echo "$$out" | grep -q 'Failing input written'; then \
				echo "fuzz $$t: the -fuzztime deadline race (golang/go#75804), no failing input: once more"; continue; \
			fi; \
			exit 1; \
		done; \
	done

# Needs the lab (scripts/lab.sh up; eval "$$(scripts/lab.sh env)").
SOAK_ITEMS ?= 10000
SOAK_EVERY ?= 1000
soak:
	$(GO) run ./scripts/soak -items $(SOAK_ITEMS) -every $(SOAK_EVERY)

# BENCHFLAGS are scripts/bench's flags; e.g. BENCHFLAGS='-repeat 3
# -latency-run 10ms -latency-n 100' leaves out the 50-target and first-task
# scenarios (a version then took 22-24 minutes on 2026-11-26, a slow day);
# BENCHFLAGS='-modes stock-pipelining,mitogen,bridge-pipelining -playbooks
# loop -n 1 -fleet 50 -fleet-latency 25ms' is the WAN fleet (each target's
# relay adds 25 ms each way); -fleet-defaults adds the fleet's runs with
# Ansible's defaults (no pipelining).
# ANSIBLE may also be a list
# (ANSIBLE=2.14,2.22). With more than one version, bench-versions.md
# compares them (scripts/bench -versions, the first listed the reference).
BENCHFLAGS ?= -repeat 3 -latency-run 10ms -latency-n 100 -fleet 50 -first 5
BENCH_VERSIONS = $(if $(filter all,$(ANSIBLE)),$$(scripts/ansible-versions.sh list),$(or $(subst $(comma),$(space),$(ANSIBLE)),debian))
comma := ,
space := $(subst ,, )
bench:
	@set -e; n=0; json=; for v in $(BENCH_VERSIONS); do \
		if [ $$v = debian ]; then p=; out=bench.md; else p=$$(scripts/ansible-versions.sh bin $$v):; out=bench-$$v.md; fi; \
		PATH="$$p$$PATH" $(GO) run ./scripts/bench -out $$out $(BENCHFLAGS); \
		n=$$((n + 1)); json="$$json $${out%.md}.json"; \
	done; \
	if [ $$n -gt 1 ]; then $(GO) run ./scripts/bench -versions -out bench-versions.md $$json; fi

demo: setup
	scripts/demo.sh

lab-up:
	scripts/lab.sh up

lab-down:
	scripts/lab.sh down
