#!/usr/bin/python
# -*- coding: utf-8 -*-
# Reports the VALUE of ab_zzstate, a library outside Ansible's zip that
# freshness.yml rewrites and removes between tasks: each task must see it
# as it is when the task starts, as a fresh python does. hook is what a
# startup hook (usercustomize.py) set, if one ran.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: ab_zzstate
short_description: report ab_zzstate.VALUE (test module)
'''

import os

from ansible.module_utils.basic import AnsibleModule

try:
    import ab_zzstate
except ImportError:
    ab_zzstate = None


def main():
    module = AnsibleModule(argument_spec=dict())
    if ab_zzstate is None:
        module.fail_json(msg='ab_zzstate not importable')
    module.exit_json(changed=False, value=ab_zzstate.VALUE, hook=os.environ.get('AB_ZZHOOK'))


if __name__ == '__main__':
    main()
