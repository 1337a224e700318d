#!/usr/bin/python
# -*- coding: utf-8 -*-
# Reports whether this process's stdlib and module_utils are as a fresh
# python has them (monkeypatch.yml). Patches nothing.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: ab_probe
short_description: report monkey-patches seen in this process (test module)
'''

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import ab_state


def main():
    module = AnsibleModule(argument_spec=dict())
    module.exit_json(changed=False, state=ab_state.state(AnsibleModule), cwd=os.getcwd())


if __name__ == '__main__':
    main()
