// Package cbuild compiles the repository's C programs for the tests and
// tools that build from source, as make build does: the shim's front
// (fakessh/front), whose start Ansible waits for at each ssh call, and the
// bench's floor (scripts/floor/c), which must start no slower. Statically
// where the C library allows, so that no dynamic loader runs at each call.
package cbuild
