# A fake Ansible module for isolation tests: it reports what it sees, then
# optionally monkey-patches the stdlib and module_utils state.
import json
import os
import sys

from ansible.module_utils import basic


def parent_of(pid):
    with open('/proc/%d/stat' % pid) as f:
        return int(f.read().rsplit(')', 1)[1].split()[1])


def fd_targets():
    out = []
    for fd in os.listdir('/proc/self/fd'):
        try:
            out.append(os.readlink('/proc/self/fd/' + fd))
        except OSError:
            pass  # listdir's own
    return sorted(out)


def main():
    args = json.loads(basic._ANSIBLE_ARGS)['ANSIBLE_MODULE_ARGS']
    # The zygote's compile-once shim for its own imports must be gone.
    get_module_code = getattr(sys.modules.get('zipimport'), '_get_module_code', None)
    out = {
        'zipimport_patched': getattr(get_module_code, '__name__', '_get_module_code') != '_get_module_code',
        # Compiled code loaded from another zygote's cache must name this zip.
        'basic_file': basic.__file__,
        'basic_code_file': basic.where(),
        # The zip the wrapper put first on sys.path: the zygote's, unless
        # the wrapper wrote a copy of its own (agent.py's PAYLOAD_LINES).
        'modlib_path': sys.path[0],
        'json_patched': json.dumps is None,
        'getcwd_patched': getattr(os.getcwd, '_patched', False),
        'basic_leak': getattr(basic, 'LEAK', None),
        'env_leak': os.environ.get('AB_LEAK'),
        'env': os.environ.get('AB_ENV'),
        'cwd': os.getcwd(),
        'ppid': os.getppid(),
        # The zygote forks a spare itself, or through its seed.
        'pppid': parent_of(os.getppid()),
        'argv': sys.argv[1:],
        # What the task holds of its seed's: no fd of its, no pinned page.
        'fds': fd_targets(),
        'vmpin': [line.split()[1] for line in open('/proc/self/status') if line.startswith('VmPin:')],
        'python': '%d.%d' % sys.version_info[:2],
        # On a terminal (a PTY run) there is no end to read to.
        'stdin': None if sys.stdin.isatty() else sys.stdin.read(),
        'args': args,
    }
    text = json.dumps(out)
    if args.get('patch'):
        def fake():
            return '/patched'
        fake._patched = True
        os.getcwd = fake
        basic.LEAK = 'leaked'
        os.environ['AB_LEAK'] = '1'
        json.dumps = None
    if args.get('noise'):
        print('noise on stdout before the result')
        sys.stdout.flush()
        os.write(1, b'\x00\x00\x00\x05\x03\x00\x00\x00\x01raw frame-like noise\n')
        os.write(2, b'noise on stderr\n')
    if args.get('raise'):
        raise RuntimeError('boom')
    if args.get('wait'):
        # Runs until the test opens this FIFO and closes it.
        with open(args['wait']) as f:
            f.read()
    sys.stdout.write(text)
    sys.stdout.write('\n')
    if args.get('signal'):
        sys.stdout.flush()
        os.kill(os.getpid(), args['signal'])
    sys.exit(args.get('rc', 0))


if __name__ == '__main__':
    main()
