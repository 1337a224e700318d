#!/usr/bin/python
# -*- coding: utf-8 -*-
# Reports what python took from the environment as it started
# (startup-env.yml): the text a file reads as, a module found on
# PYTHONPATH, the time zone, a library found on LD_LIBRARY_PATH.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: ab_startenv
short_description: report python's start-up environment (test module)
options:
  path:
    description: a UTF-8 text file to read in text mode
    type: str
  lib:
    description: a shared library to load by name (LD_LIBRARY_PATH)
    type: str
'''

import ctypes
import sys
import time

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(path=dict(type='str'), lib=dict(type='str')))
    try:
        with open(module.params['path']) as f:
            text = f.read()
    except Exception as e:
        text = type(e).__name__
    try:
        import ab_startenv_pp
        pp = ab_startenv_pp.VALUE
    except ImportError as e:
        pp = type(e).__name__
    try:
        ctypes.CDLL(module.params['lib'])
        lib = 'loaded'
    except OSError:
        lib = 'OSError'
    module.exit_json(changed=False, text=text, pp=pp, tz=time.strftime('%Z'), lib=lib,
                     utf8_mode=sys.flags.utf8_mode, fsencoding=sys.getfilesystemencoding())


if __name__ == '__main__':
    main()
