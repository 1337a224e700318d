# Stub of ansible.module_utils.basic for the fake module tests.
_ANSIBLE_ARGS = None
