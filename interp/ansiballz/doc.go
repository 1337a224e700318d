// Package ansiballz recognises Ansible's module wrapper (AnsiballZ, from
// ansible/executor/module_common.py's ANSIBALLZ_TEMPLATE) in every format
// from ansible-core 2.14 to 2.22, and is the only place that does:
//
//   - Triple (2.14, 2.15): ZIPDATA = """<base64 zip>""" and
//     ANSIBALLZ_PARAMS = '<json>' inside def _ansiballz_main();
//   - Repr (2.16-2.18): the same with ZIPDATA = '<base64 zip>';
//   - Call (2.19+): _ansiballz_main(...) called with one keyword argument
//     per line: zip_data, params, module_fqn, profile, date_time, ...
//
// Parse takes a whole wrapper apart (the zip's position, the module, its
// parameters, the profile); Line classifies a single line, for scanners
// that see the wrapper as a stream (the journal). A source that does not
// parse is not guessed at: callers run it as it is and count it as an
// unrecognised wrapper.
//
// # Test data
//
// testdata/*.py.gz are ping from every version and command from the
// oldest and newest (the agent's Python tests use them too);
// testdata/recorded/VERSION/ holds command, stat and file from every
// version, as Ansible pipes them (piped-) and as it writes them to a file
// (file-), recorded by scripts/record-wrappers.sh against the lab.
package ansiballz
