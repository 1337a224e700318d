# ansible-bridge integration tests: a stdout callback that records every
# task result as one JSON document, in the order Ansible reports them.
#
# ansible-core ships no JSON callback of its own (ansible.posix.json lives in
# a collection that a bare ansible-core install does not have), so the tests
# bring this one. It writes to the file named by $AB_RESULT_FILE at the end
# of the run (stdout when unset) and prints nothing else, so that Ansible's
# own stdout/stderr stay comparable.
#
# Output:
#   {"events": [{"play": ..., "task": ..., "action": ..., "host": ...,
#                "status": "ok|failed|skipped|unreachable",
#                "ignore_errors": bool, "result": {...}}, ...],
#    "stats": {"host": {"ok": n, "changed": n, ...}}}

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = """
    name: abjson
    type: stdout
    short_description: JSON record of every task result (ansible-bridge tests)
    description:
        - Writes all task results and the recap stats as JSON to $AB_RESULT_FILE.
"""

import copy
import json
import os

from ansible.parsing.ajson import AnsibleJSONEncoder
from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "abjson"

    def __init__(self, display=None):
        super(CallbackModule, self).__init__(display)
        self.events = []
        self.play = None

    def v2_playbook_on_play_start(self, play):
        self.play = play.get_name()

    def _record(self, status, result, ignore_errors=False):
        res = copy.deepcopy(result._result)
        # Controller-internal bookkeeping, never produced by the target.
        for k in list(res):
            if k.startswith("_ansible_") and k != "_ansible_no_log":
                del res[k]
        self.events.append(
            {
                "play": self.play,
                "task": result._task.get_name(),
                "action": result._task.action,
                "host": result._host.get_name(),
                "status": status,
                "ignore_errors": bool(ignore_errors),
                "result": res,
            }
        )

    def v2_runner_on_ok(self, result):
        self._record("ok", result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record("failed", result, ignore_errors)

    def v2_runner_on_skipped(self, result):
        self._record("skipped", result)

    def v2_runner_on_unreachable(self, result):
        self._record("unreachable", result)

    def v2_playbook_on_stats(self, stats):
        summary = {}
        for h in sorted(stats.processed.keys()):
            summary[h] = stats.summarize(h)
        doc = json.dumps(
            {"events": self.events, "stats": summary},
            cls=AnsibleJSONEncoder,
            indent=1,
            sort_keys=True,
            ensure_ascii=False,
        )
        path = os.environ.get("AB_RESULT_FILE")
        if path:
            with open(path, "w", encoding="utf-8") as f:
                f.write(doc)
        else:
            self._display.display(doc)
