# Stub of ansible.module_utils.basic for the fake module tests.
_ANSIBLE_ARGS = None


def where():
    """The file this module's code was compiled for (its co_filename)."""
    return where.__code__.co_filename
