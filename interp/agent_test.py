"""Unit tests of the agent's Python side (stdlib unittest, no Go needed):

    python3 -m unittest discover -s interp -p 'agent_test.py'

make unit and make test run them on every Python 3 the Go tests use.
The wrappers are real ones from each ansible-core version
(interp/ansiballz/testdata)."""

import ast
import glob
import gzip
import io
import json
import os
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import agent  # noqa: E402

WRAPPERS = sorted(glob.glob(os.path.join(HERE, 'ansiballz', 'testdata', '*.py.gz')))
ZIP_RE = re.compile(br"""(^    ZIPDATA = \"\"\"|^    ZIPDATA = '|^zip_data=')([A-Za-z0-9+/=]+)""", re.M)
# The oldest target Python each version's module_utils supports.
MIN_PYTHON = {'2.14': (3, 5), '2.16': (3, 6), '2.18': (3, 8), '2.19': (3, 8), '2.22': (3, 9)}


def read(path):
    with gzip.open(path) as f:
        return f.read()


def template(src):
    """The wrapper with its zip replaced by the marker, as Go's
    interp.ParseWrapper sends it, and the zip's base64."""
    m = ZIP_RE.search(src)
    if m is None:
        raise AssertionError('no zip literal')
    return src[:m.start(2)] + agent.ZIP_MARKER + src[m.end(2):], m.group(2)


def another_task(tpl):
    """tpl as a later task of the same module sends it: other parameters
    and, from 2.19, another start time."""
    tpl = tpl.replace(b'"_ansible_check_mode": false', b'"_ansible_check_mode": true', 1)
    return re.sub(br'^(date_time=datetime\.datetime\()\d+', br'\g<1>2031', tpl, count=1, flags=re.M)


def str_consts(code):
    out = []
    for c in code.co_consts:
        if isinstance(c, str):
            out.append(c)
        elif isinstance(c, type(code)):
            out.extend(str_consts(c))
    return out


class WrapperCompilerTest(unittest.TestCase):

    def setUp(self):
        self.assertGreaterEqual(len(WRAPPERS), 7, 'wrappers in interp/ansiballz/testdata')

    def test_one_cached_shape_per_module(self):
        """A module's tasks differ only in what the compiler swaps in: the
        cache holds one compiled shape however many tasks run."""
        for path in WRAPPERS:
            with self.subTest(os.path.basename(path)):
                tpl, b64 = template(read(path))
                wc = agent.WrapperCompiler(b64)
                if not wc.ok:
                    self.skipTest('python < 3.8 has no code.replace: the full source is compiled')
                wc.learn(tpl)
                later = another_task(tpl)
                self.assertNotEqual(later, tpl)
                wc.learn(later)
                self.assertEqual(len(wc.cache), 1, 'a per-task part is in the cache key')
                consts = str_consts(wc.compile(later, '<stdin>'))
                self.assertIn(b64.decode('ascii'), consts)
                self.assertTrue(any('"_ansible_check_mode": true' in c for c in consts))
                self.assertFalse(any(agent.PARAMS_MARKER in c or agent.DATETIME_MARKER in c for c in consts))

    def test_runs_every_version(self):
        """The compiled wrapper runs the module as the version's own
        wrapper would: ping answers pong."""
        for path in WRAPPERS:
            name = os.path.basename(path)
            module, version = name[:-len('.py.gz')].split('-')
            if module != 'ping':
                continue
            with self.subTest(name):
                if sys.version_info[:2] < MIN_PYTHON[version]:
                    self.skipTest('ansible-core %s needs python >= %d.%d on the target' % ((version,) + MIN_PYTHON[version]))
                tpl, b64 = template(read(path))
                code = agent.WrapperCompiler(b64).compile(tpl, '<stdin>')
                out = run_in_child(code)
                result = json.loads(out.decode('utf-8').strip().splitlines()[-1])
                self.assertEqual(result.get('ping'), 'pong', out)


def run_in_child(code):
    """stdout of code run as __main__ in a fork, as the agent runs a task."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.dup2(w, 1)
            sys.stdout = io.TextIOWrapper(io.FileIO(1, 'w', closefd=False), write_through=True)
            sys.argv = ['']
            exec(code, {'__name__': '__main__', '__builtins__': __builtins__})
        except SystemExit:
            pass
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    os.waitpid(pid, 0)
    return b''.join(chunks)


class PingParamsTest(unittest.TestCase):

    def test_params_regex_every_format(self):
        """The parameters' literal is found in every format."""
        for path in WRAPPERS:
            with self.subTest(os.path.basename(path)):
                m = agent.PARAMS_RE.search(read(path))
                self.assertIsNotNone(m)
                self.assertIn(b'ANSIBLE_MODULE_ARGS', m.group(2))


class ProtocolConstantsTest(unittest.TestCase):
    """agent.py's frame types, magic, protocol version, header and frame
    limit are interp/protocol.go's (TestAgentConstants checks the same
    from Go)."""

    def setUp(self):
        with open(os.path.join(HERE, 'protocol.go')) as f:
            self.go = f.read()

    def go_const(self, pattern):
        m = re.search(pattern, self.go, re.M)
        self.assertIsNotNone(m, 'protocol.go: no line matches %s' % pattern)
        return m.group(1)

    def test_frame_types(self):
        """T_NAME for each of Go's frameName, and no other."""
        go = {}
        for name, value in re.findall(r'^\s+frame(\w+)\s*=\s*(\d+)\b', self.go, re.M):
            go['T_' + re.sub(r'([a-z])([A-Z])', r'\1_\2', name).upper()] = int(value)
        self.assertGreaterEqual(len(go), 7)
        py = {k: v for k, v in vars(agent).items() if k.startswith('T_')}
        self.assertEqual(py, go)

    def test_magic_and_version(self):
        magic = ast.literal_eval('b' + self.go_const(r'^const Magic = ("(?:[^"\\]|\\.)*")$'))
        self.assertEqual(agent.MAGIC, magic)
        self.assertEqual(agent.PROTOCOL, int(self.go_const(r'^const Protocol = (\d+)$')))

    def test_header_and_limit(self):
        self.assertEqual(agent.HDR.size, int(self.go_const(r'^\s+headerSize\s*=\s*(\d+)\b')))
        self.assertEqual(agent.MAX_FRAME, 1 << int(self.go_const(r'^\s+maxFrame\s*=\s*1 << (\d+)$')))


if __name__ == '__main__':
    unittest.main()
