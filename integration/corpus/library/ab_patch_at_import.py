#!/usr/bin/python
# -*- coding: utf-8 -*-
# A module that monkey-patches the stdlib when it is imported, at the top
# level, as a few real modules do (monkeypatch-at-import.yml). Stock Ansible
# runs each task in a fresh python, which runs this file's top level exactly
# once: every task sees time.monotonic patched once (depth 1), never twice.
# A python that imported this file ahead of the task (the bridge's zygote)
# must not pass its patch on to the tasks it forks.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: ab_patch_at_import
short_description: monkey-patch the stdlib at import time (test module)
'''

import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import ab_state

AT_IMPORT = ab_state.state(AnsibleModule)
ab_state.patch(time, 'monotonic')
ab_state.REGISTRY.append('import')


def main():
    module = AnsibleModule(argument_spec=dict())
    module.exit_json(changed=False, at_import=AT_IMPORT, before=ab_state.state(AnsibleModule))


if __name__ == '__main__':
    main()
