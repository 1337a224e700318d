#!/usr/bin/python
# -*- coding: utf-8 -*-
# A module that monkey-patches the stdlib and module_utils in its own
# process and leaves the patches in place when it returns (monkeypatch.yml).
# Stock Ansible runs every task in a fresh python, so no task ever sees
# another's patches; the bridge runs tasks in forks of a zygote that
# imported this module's zip, which must stay clean.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: ab_patch
short_description: monkey-patch the stdlib in this process (test module)
options:
  tag:
    description: recorded in the module_utils registry
    type: str
    default: x
'''

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import ab_state


def main():
    module = AnsibleModule(argument_spec=dict(tag=dict(type='str', default='x')))
    before = ab_state.state(AnsibleModule)

    ab_state.patch(os, 'getcwd')
    ab_state.patch(json, 'dumps')  # exit_json goes through the wrapper
    ab_state.patch(time, 'time')
    import builtins
    builtins.ab_leak = module.params['tag']
    json.ab_leak = module.params['tag']
    AnsibleModule.ab_leak = module.params['tag']
    import sys
    sys.path.append(ab_state.LEAK_PATH)
    os.environ['AB_LEAK'] = module.params['tag']
    ab_state.REGISTRY.append(module.params['tag'])

    module.exit_json(changed=False, before=before,
                     after=ab_state.state(AnsibleModule), cwd=os.getcwd())


if __name__ == '__main__':
    main()
