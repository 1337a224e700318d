// Package frontbuild compiles the shim's C front (fakessh/front/front.c)
// for the tests and tools that build the bridge from source, as make
// build does: statically where the C library allows, so that no dynamic
// loader runs at each of Ansible's ssh calls.
package frontbuild
