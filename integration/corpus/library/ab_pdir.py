#!/usr/bin/python
# -*- coding: utf-8 -*-
# Exits, or kills itself with SIGKILL: its payload dir, named for this
# module alone, is then removed or left (payload-dirs.yml).

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: ab_pdir
short_description: exit or die of SIGKILL (test module)
'''

import os
import signal

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(kill=dict(type='bool', default=False)))
    if module.params['kill']:
        os.kill(os.getpid(), signal.SIGKILL)
    module.exit_json(changed=False)


if __name__ == '__main__':
    main()
