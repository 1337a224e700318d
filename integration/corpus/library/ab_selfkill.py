#!/usr/bin/python
# -*- coding: utf-8 -*-
# Writes a line to stdout and to stderr, then kills itself with a signal:
# a module the OOM killer or a timeout ended. Stock's shell reports it
# ("Killed", "Terminated") after the module's output (basics.yml).

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: ab_selfkill
short_description: die of a signal after some output (test module)
'''

import os
import sys

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(signal=dict(type='int', required=True)))
    sys.stdout.write('out-before')
    sys.stdout.flush()
    sys.stderr.write('err-before\n')
    sys.stderr.flush()
    os.kill(os.getpid(), module.params['signal'])


if __name__ == '__main__':
    main()
