// Package cbuild compiles the repository's C programs for the tests and
// tools that build from source, as make build does: the shim's front
// (fakessh/front), whose start Ansible waits for at each ssh call, and the
// bench's floor (scripts/floor/c), which must start no slower.
//
// Statically, so that no dynamic loader runs at each call, and against
// musl where musl-gcc is installed (Debian's musl-tools). glibc's start,
// static or not, reads the CPU's cache sizes with dozens of cpuid
// instructions, and each one traps to the hypervisor in a VM: on the
// machine this was measured on (2026-11-29), an empty static glibc
// program took 525 µs from spawn to exit, an empty static musl one 95 µs.
package cbuild
