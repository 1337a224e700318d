# A become plugin the bridge does not parse: sudo reached through env(1).
# The bridge must pass its steps through unchanged.
from __future__ import annotations

DOCUMENTATION = """
    name: envsudo
    short_description: sudo through /usr/bin/env (a test plugin)
    description:
        - Runs sudo -n through /usr/bin/env, a wrapper shape the bridge does not know.
    author: ansible-bridge tests
    options:
        become_user:
            description: User you 'become' to execute the task
            default: root
            vars:
              - name: ansible_become_user
"""

from ansible.plugins.become import BecomeBase


class BecomeModule(BecomeBase):

    name = 'envsudo'

    def build_become_command(self, cmd, shell):
        super(BecomeModule, self).build_become_command(cmd, shell)
        if not cmd:
            return cmd
        user = self.get_option('become_user') or 'root'
        return ' '.join(['/usr/bin/env', 'sudo', '-H', '-S', '-n', '-u', user,
                         self._build_success_command(cmd, shell)])
