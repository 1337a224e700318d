// Package sshconf is OpenSSH's configuration language, once for the shim
// (package fakessh, which parses ssh -o and decides what the bridge can
// serve) and the daemon's SSH client (package bridge/sshclient, which
// reads ssh_config files and applies the values):
//
//   - Split, Strdelim: misc.c's argv_split and strdelim, the tokenizers
//     of a config line;
//   - ConvTime, Strtonum, Strtoll: misc.c's and OpenBSD's number and time
//     parsers;
//   - Keywords: every keyword the bridge understands, how readconf.c checks
//     its value (Kind, States), and whether the daemon's client applies it
//     (Served) or why it needs not (Reason). A keyword not listed makes
//     the shim run the real binary.
//
// The package is stdlib-only: the shim links it.
package sshconf
