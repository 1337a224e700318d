# -*- coding: utf-8 -*-
# Shared by library/ab_patch.py and library/ab_probe.py (monkeypatch.yml):
# how far this process's stdlib and module_utils are patched.
#
# A patch wraps a function in one that calls the original and carries a
# depth: 1 for a patch of the original, 2 for a patch of a patch, and so on.
# A process that starts clean shows depth 0 everywhere.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import builtins
import json
import os
import sys
import time

MARK = '_ab_patch_depth'
LEAK_PATH = '/nonexistent/ab-leak'

# Module state of a module_utils file: the zygote imports it once; each
# task may append to it.
REGISTRY = []


def patch(owner, name):
    """Replace owner.name by a wrapper that calls the original."""
    orig = getattr(owner, name)
    depth = getattr(orig, MARK, 0)

    def wrapper(*args, **kwargs):
        return orig(*args, **kwargs)

    setattr(wrapper, MARK, depth + 1)
    setattr(owner, name, wrapper)


def depth(f):
    return getattr(f, MARK, 0)


def state(module_class):
    """What a fresh python shows: all zero, None, False or empty."""
    return {
        'os.getcwd': depth(os.getcwd),
        'json.dumps': depth(json.dumps),
        'time.time': depth(time.time),
        'time.monotonic': depth(time.monotonic),
        'builtins.ab_leak': getattr(builtins, 'ab_leak', None),
        'json.ab_leak': getattr(json, 'ab_leak', None),
        'AnsibleModule.ab_leak': getattr(module_class, 'ab_leak', None),
        'sys.path leak': LEAK_PATH in sys.path,
        'os.environ AB_LEAK': os.environ.get('AB_LEAK'),
        'registry': list(REGISTRY),
    }
