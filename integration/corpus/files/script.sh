#!/bin/sh
# Run by the `script` module: arguments, stdout, stderr and exit status.
echo "script args: $#"
for a in "$@"; do
	echo "arg=[$a]"
done
echo "to stderr" >&2
exit "${AB_SCRIPT_RC:-0}"
