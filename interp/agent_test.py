"""Unit tests of the agent's Python side (stdlib unittest, no Go needed):

    python3 -m unittest discover -s interp -p 'agent_test.py'

make agent-test (and so make unit and make test) runs them on every
Python 3.6+ here. They test the agent's pieces one by one (frames,
messages, files, terminals, the wrapper compiler, the warm-up, prefault,
a task run in a fork), that its protocol constants are
interp/protocol.go's, and the whole agent in a child process driven over
its stdin and stdout as Go's Client drives it. The wrappers are real ones
from each ansible-core version (interp/ansiballz/testdata)."""

import array
import ast
import base64
import fcntl
import glob
import gzip
import hashlib
import importlib
import io
import json
import os
import re
import select
import shutil
import site
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import termios
import unittest
import zipfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import agent  # noqa: E402

AGENT = os.path.join(HERE, 'agent.py')

WRAPPERS = sorted(glob.glob(os.path.join(HERE, 'ansiballz', 'testdata', '*.py.gz')))
ZIP_RE = re.compile(br"""(^    ZIPDATA = \"\"\"|^    ZIPDATA = '|^zip_data=')([A-Za-z0-9+/=]+)""", re.M)
# The oldest target Python each version's module_utils supports.
MIN_PYTHON = {'2.14': (3, 5), '2.16': (3, 6), '2.18': (3, 8), '2.19': (3, 8), '2.22': (3, 9)}


def read(path):
    with gzip.open(path) as f:
        return f.read()


# Where a template's per-task parts are, as Go's package ansiballz finds
# them (TestParseEveryVersion checks the offsets it gives match these).
PARAMS_RE = re.compile(br"^(    ANSIBALLZ_PARAMS = |params=)('(?:[^'\\\n]|\\.)*')(,?)$", re.M)
DATETIME_RE = re.compile(br"^(?:date_time=(datetime\.datetime\([0-9, ]+, tzinfo=datetime\.timezone\.utc\)),"
                         br"|        zinfo\.date_time = (\([0-9, ]+\)))$", re.M)


# The payload lines, in the order of agent.PAYLOAD_LINES: group 2 is what
# is replaced.
PAYLOAD_RES = [re.compile(p, re.M) for p in (
    br"^( +)(z = zipfile\.ZipFile\(modlib_path, mode='a'\))$",
    br"^( +)(z\.writestr\(zinfo, sitecustomize\))$",
    br"^( +)(z\.close\(\))$",
    br"^( +)(temp_path = (?:os\.path\.realpath\()?tempfile\.mkdtemp\(prefix=[^\n]*\))$",
    br"^( +)(zipped_mod = os\.path\.join\(temp_path, [^\n]*\))$",
    br"^( +)(with open\(zipped_mod, 'wb'\) as modlib:)$",
    br"^( +)(shutil\.rmtree\(temp_path(?:, ignore_errors=True)?\))$",
)]


def spans(tpl):
    """The spans of tpl's parameters, date_time and payload lines, as a
    module request gives them."""
    m = PARAMS_RE.search(tpl)
    d = DATETIME_RE.search(tpl)
    payload = []
    for rx in PAYLOAD_RES:
        found = list(rx.finditer(tpl))
        if len(found) != 1:
            payload = None
            break
        payload.append([found[0].start(2), found[0].end(2)])
    return [[m.start(2), m.end(2)] if m else None, [d.start(d.lastindex), d.end(d.lastindex)] if d else None, payload]


def template(src):
    """The wrapper with its zip replaced by the marker, as Go's
    ansiballz.Wrapper.Template makes it, and the zip's base64."""
    m = ZIP_RE.search(src)
    if m is None:
        raise AssertionError('no zip literal')
    return src[:m.start(2)] + agent.ZIP_MARKER + src[m.end(2):], m.group(2)


def ping_wrappers():
    """(file name, ansible-core version, source) of each version's ping
    wrapper."""
    out = []
    for path in WRAPPERS:
        name = os.path.basename(path)
        module, version = name[:-len('.py.gz')].split('-')
        if module == 'ping':
            out.append((name, version, read(path)))
    return out


def skip_unless_runs(test, version):
    """Skip test where this python is older than version's module_utils
    support on a target."""
    if sys.version_info[:2] < MIN_PYTHON[version]:
        test.skipTest('ansible-core %s needs python >= %d.%d on the target' % ((version,) + MIN_PYTHON[version]))


def another_task(tpl):
    """tpl as a later task of the same module sends it: other parameters
    and another start time."""
    tpl = tpl.replace(b'"_ansible_check_mode": false', b'"_ansible_check_mode": true', 1)
    return re.sub(br'^(date_time=datetime\.datetime\(|        zinfo\.date_time = \( ?)\d+', br'\g<1>2031', tpl, count=1, flags=re.M)


def str_consts(code):
    out = []
    for c in code.co_consts:
        if isinstance(c, str):
            out.append(c)
        elif isinstance(c, type(code)):
            out.extend(str_consts(c))
    return out


def children(pid):
    """pid's child processes."""
    with open('/proc/%d/task/%d/children' % (pid, pid)) as f:
        return [int(x) for x in f.read().split()]


def mem_has(pid, needle):
    """Whether needle is in a readable private mapping of pid's memory."""
    with open('/proc/%d/maps' % pid) as f:
        maps = f.read().splitlines()
    with open('/proc/%d/mem' % pid, 'rb', 0) as mem:
        for line in maps:
            f = line.split()
            if f[1][0] != 'r' or (len(f) >= 6 and f[5].startswith('[v')):
                continue
            lo, hi = [int(x, 16) for x in f[0].split('-')]
            try:
                mem.seek(lo)
                data = mem.read(hi - lo)
            except (OSError, ValueError, OverflowError):
                continue
            if needle in data:
                return True
    return False


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
                wc.learn(tpl, spans(tpl))
                later = another_task(tpl)
                self.assertNotEqual(later, tpl)
                wc.learn(later, spans(later))
                self.assertEqual(len(wc.cache), 1, 'a per-task part is in the cache key')
                consts = str_consts(wc.compile(later, '<stdin>', spans(later)))
                self.assertIn(b64.decode('ascii'), consts)
                self.assertTrue(any('"_ansible_check_mode": true' in c for c in consts))
                self.assertFalse(any(agent.PARAMS_MARKER in c or agent.DATETIME_MARKER in c for c in consts))

    def test_shape_digest_follows_the_cache_key(self):
        """The agent sends a zygote a template's shape until it has learned
        it: two tasks' templates share a shape_digest exactly when learn
        gives them one cache key."""
        keys, digests = [], []
        for path in WRAPPERS:
            tpl, b64 = template(read(path))
            wc = agent.WrapperCompiler(b64)
            if not wc.ok:
                self.skipTest('python < 3.8 has no code.replace: the full source is compiled')
            for t in (tpl, another_task(tpl)):
                sp = spans(t)
                keys.append(wc._split(t, sp)[0])
                digests.append(agent.shape_digest(t, sp[0], sp[1]))
        # One key per wrapper, but for those that differ only in what is
        # swapped in (2.16's and 2.18's ping: the same template).
        blanked = set()
        for path in WRAPPERS:
            tpl, _ = template(read(path))
            for start, stop in sorted((sp for sp in spans(tpl)[:2] if sp), reverse=True):
                tpl = tpl[:start] + tpl[stop:]
            blanked.add(tpl)
        self.assertEqual(len(set(keys)), len(blanked), 'one key per wrapper')
        for i, (k, d) in enumerate(zip(keys, digests)):
            for j in range(i):
                self.assertEqual(k == keys[j], d == digests[j], (WRAPPERS[i // 2], WRAPPERS[j // 2]))

    def test_runs_every_version(self):
        """The compiled wrapper runs the module as the version's own
        wrapper would: ping answers pong."""
        for name, version, src in ping_wrappers():
            with self.subTest(name):
                skip_unless_runs(self, version)
                tpl, b64 = template(src)
                code = agent.WrapperCompiler(b64).compile(tpl, '<stdin>', spans(tpl))
                out = run_in_child(code)
                result = json.loads(out.decode('utf-8').strip().splitlines()[-1])
                self.assertEqual(result.get('ping'), 'pong', out)

    def test_payload_lines_every_version(self):
        """Every version's wrapper has each payload line once, and loses
        none of its lines without them (a traceback keeps its numbers)."""
        for path in WRAPPERS:
            with self.subTest(os.path.basename(path)):
                tpl, b64 = template(read(path))
                wc = agent.WrapperCompiler(b64, '/z/a.zip')
                if not wc.ok:
                    self.skipTest('python < 3.8 has no code.replace: the full source is compiled')
                sp = spans(tpl)
                self.assertIsNotNone(sp[2])
                out, _ = wc._split(tpl, sp)
                self.assertEqual(out.count(b'\n'), tpl.count(b'\n'))
                self.assertNotIn(b'tempfile.mkdtemp(', out)
                self.assertNotIn(b'shutil.rmtree(temp_path', out)
                self.assertIn(b"zipped_mod = '/z/a.zip'", out)

    def test_payload_lines_all_or_none(self):
        """Without the payload lines' spans (Go sends none unless each is
        there once), or without the zip on disk, the wrapper's lines stay:
        the temp dir it makes is then its own to remove."""
        tpl, b64 = template(read(WRAPPERS[0]))
        params, time_, payload = spans(tpl)
        for wc, sp in ((agent.WrapperCompiler(b64, '/z/a.zip'), [params, time_, None]),
                       (agent.WrapperCompiler(b64, '/z/a.zip'), [params, time_, payload[:-1]]),
                       (agent.WrapperCompiler(b64), [params, time_, payload])):
            if not wc.ok:
                self.skipTest('python < 3.8 has no code.replace: the full source is compiled')
            out, _ = wc._split(tpl, sp)
            self.assertIn(b'shutil.rmtree(temp_path', out)
            self.assertNotIn(b"zipped_mod = '/z/a.zip'", out)

    def test_runs_from_zygote_zip(self):
        """A cached shape runs its module from the zip on disk: no temp
        dir, and nothing written to that zip."""
        for name, version, src in ping_wrappers():
            with self.subTest(name):
                skip_unless_runs(self, version)
                tpl, b64 = template(src)
                d = tempfile.mkdtemp()
                self.addCleanup(shutil.rmtree, d)
                zp = os.path.join(d, 'z.zip')
                with open(zp, 'wb') as f:
                    f.write(base64.b64decode(b64))
                wc = agent.WrapperCompiler(b64, zp)
                if not wc.ok:
                    self.skipTest('python < 3.8 has no code.replace: the full source is compiled')
                wc.learn(tpl, spans(tpl))
                later = another_task(tpl)
                code = wc.compile(later, '<stdin>', spans(later))

                def no_mkdtemp():
                    def refuse(*a, **kw):
                        raise AssertionError('mkdtemp called')
                    tempfile.mkdtemp = refuse
                out = run_in_child(code, no_mkdtemp)
                result = json.loads(out.decode('utf-8').strip().splitlines()[-1])
                self.assertEqual(result.get('ping'), 'pong', out)
                with zipfile.ZipFile(zp) as z:
                    self.assertNotIn('sitecustomize.py', z.namelist(), 'the shared zip was written to')


def runpy_module(name, source):
    """A zip holding module name (source), its digest, and the deflated
    template of a wrapper that runs it: the zip's base64 goes where the
    marker is, as in a real wrapper."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, 'w') as z:
        z.writestr(name + '.py', source)
    zip_ = buf.getvalue()
    tpl = (b"import base64, os, runpy, sys, tempfile\n"
           b"p = os.path.join(tempfile.mkdtemp(), 'm.zip')\n"
           b"open(p, 'wb').write(base64.b64decode('" + agent.ZIP_MARKER + b"'))\n"
           b"sys.path.insert(0, p)\n"
           b"runpy.run_module('" + name.encode() + b"', run_name='__main__')\n")
    return zip_, hashlib.sha256(zip_).hexdigest(), zlib.compress(tpl)


def run_in_child(code, prep=None):
    """stdout of code run as __main__ in a fork, as the agent runs a task
    (after prep, in the fork, if given)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            if prep is not None:
                prep()
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


class StrLiteralTest(unittest.TestCase):

    def reference(self, text):
        """What the full parse gives: the str, or None."""
        try:
            value = ast.literal_eval(text.decode('utf-8'))
        except (ValueError, SyntaxError):
            return None
        return value if type(value) is str else None

    def test_as_python_reads_it(self):
        """str_literal reads a literal as python does, with or without the
        shortcut: repr()s of parameters, and literals repr() never writes."""
        values = ['', 'plain', '{"a": "b"}', "it's", 'back\\slash', 'tab\there', 'line\nfeed',
                  'caf\u00e9 \u2028 \U0001f600', '\x00nul', '\x7fdel', '"\'both\'"', 'cr\rx']
        texts = [repr(v).encode('utf-8') for v in values]
        texts += [repr(json.dumps({'ANSIBLE_MODULE_ARGS': {'_raw_params': v}})).encode('utf-8') for v in values]
        texts += [b"'a' 'b'", b'"x"', b"b'x'", b"'''x'''", b"r'x'", b"'\x00'", b"'a\x00b'", b"'a\rb'",
                  b"'a\nb'", b"'\xff'", b"'\xc3\xa9'", b"'", b"''", b"1", b"'x' + 'y'", b"('x')"]
        for text in texts:
            with self.subTest(text):
                self.assertEqual(agent.str_literal(text), self.reference(text))


class PingParamsTest(unittest.TestCase):

    def test_spans_every_format(self):
        """The parameters' literal (and 2.19+'s date_time) where the
        request says are swapped; spans that do not hold them give no
        cache key: the full source is compiled."""
        for path in WRAPPERS:
            with self.subTest(os.path.basename(path)):
                tpl, b64 = template(read(path))
                wc = agent.WrapperCompiler(b64, '/z/a.zip')
                if not wc.ok:
                    self.skipTest('python < 3.8 has no code.replace: the full source is compiled')
                params, time_, payload = spans(tpl)
                key, values = wc._split(tpl, [params, time_, payload])
                self.assertIn(b'ANSIBLE_MODULE_ARGS', tpl[params[0]:params[1]])
                self.assertIn('ANSIBLE_MODULE_ARGS', values[agent.PARAMS_MARKER])
                self.assertEqual(agent.DATETIME_MARKER in values, time_ is not None)
                self.assertEqual(key.count(repr(agent.PARAMS_MARKER).encode('ascii')), 1)
                n = len(tpl)
                for bad in ([None, None, None], None, [[params[0] + 1, params[1]], time_, None], [[0, n + 1], None, None],
                            [params, [params[0], params[0] + 5], None], [params, [0, 10], None],
                            [params, time_, [params] + payload[1:]]):
                    self.assertEqual(wc._split(tpl, bad), (None, None), bad)


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

    def test_zip_marker(self):
        with open(os.path.join(HERE, 'module.go')) as f:
            m = re.search(r'^const zipMarker = "([^"\\]*)"$', f.read(), re.M)
        self.assertIsNotNone(m)
        self.assertEqual(agent.ZIP_MARKER, m.group(1).encode('ascii'))

    def test_header_and_limit(self):
        self.assertEqual(agent.HDR.size, int(self.go_const(r'^\s+headerSize\s*=\s*(\d+)\b')))
        self.assertEqual(agent.MAX_FRAME, 1 << int(self.go_const(r'^\s+maxFrame\s*=\s*1 << (\d+)$')))


# ---------------------------------------------------------------- pieces

def in_child(fn):
    """Run fn in a fork, as the agent runs a task: its exit status (from
    os._exit(fn()), or 99 if fn raised), stdout and stderr."""
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    pid = os.fork()
    if pid == 0:
        rc = 99
        try:
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            rc = fn() or 0
        except BaseException:
            import traceback
            os.write(2, traceback.format_exc().encode())
        finally:
            os._exit(rc)
    _, st = os.waitpid(pid, 0)
    with out, err:
        out.seek(0)
        err.seek(0)
        return os.WEXITSTATUS(st) if os.WIFEXITED(st) else -os.WTERMSIG(st), out.read(), err.read()


def frame(typ, rid, payload=b''):
    return agent.HDR.pack(5 + len(payload), typ, rid) + payload


class FrameReaderTest(unittest.TestCase):

    def test_split_anywhere(self):
        """Frames come out whole however the stream is cut."""
        stream = frame(agent.T_REQ, 1, b'abc') + frame(agent.T_STDIN_EOF, 2) + frame(agent.T_CANCEL, 3, b'x' * 70000)
        want = [(agent.T_REQ, 1, b'abc'), (agent.T_STDIN_EOF, 2, b''), (agent.T_CANCEL, 3, b'x' * 70000)]
        for step in (1, 2, 9, 1000, len(stream)):
            with self.subTest(step=step):
                r = agent.FrameReader()
                got = []
                for i in range(0, len(stream), step):
                    got.extend(r.feed(stream[i:i + step]))
                self.assertEqual(got, want)
                self.assertEqual(len(r.q), 0)
                self.assertNotIn(b'x', r.q.buf)

    def test_bad_length(self):
        """A length below the header's or above MAX_FRAME ends the stream,
        after the frames before it."""
        for n in (4, agent.MAX_FRAME + 1):
            with self.subTest(n=n):
                r = agent.FrameReader()
                got = []
                with self.assertRaises(agent.ProtocolError):
                    for f in r.feed(frame(agent.T_REQ, 1, b'ok') + agent.HDR.pack(n, agent.T_REQ, 2)):
                        got.append(f)
                self.assertEqual(got, [(agent.T_REQ, 1, b'ok')])

    def test_decode_request(self):
        js = json.dumps({'op': 'put', 'path': '/x'}).encode()
        req, blob = agent.decode_request(agent.U32.pack(len(js)) + js + b'\x00data')
        self.assertEqual(req, {'op': 'put', 'path': '/x'})
        self.assertEqual(blob, b'\x00data')


class WipeTest(unittest.TestCase):
    """What may hold a task's arguments or output is overwritten once
    done with."""

    def test_byte_queue(self):
        """Bytes that leave the queue, and buffers it outgrows, are zeroed;
        what is queued comes out in order however it is cut."""
        q = agent.ByteQueue(8)
        out = bytearray()
        old = []
        for i in range(200):
            q.append(b'secret%03d' % i)
            old.append(q.buf)
            if i % 3 == 0:
                n = min(len(q), 7)
                out += q.view()[:n]
                q.consume(n)
        out += q.view()
        q.clear()
        self.assertEqual(bytes(out), b''.join(b'secret%03d' % i for i in range(200)))
        for b in old + [q.buf]:
            self.assertNotIn(b'secret', b)

    def test_blank_params(self):
        tpl = bytearray(b"A = 'args'\nB = 1\n")
        agent.blank_params(tpl, [4, 10])
        self.assertEqual(tpl, b"A = '    '\nB = 1\n")
        agent.blank_params(tpl, None)  # no span: unchanged
        agent.blank_params(tpl, [4, 100])  # out of range: unchanged
        self.assertEqual(tpl, b"A = '    '\nB = 1\n")

    def test_forget_bytes(self):
        b = bytes(bytearray(b'nolog-marker'))
        agent.forget_bytes(b)
        self.assertEqual(b, bytes(12))
        kept = bytes(bytearray(b'shared'))
        also = [kept]
        agent.forget_bytes(kept)  # referred to elsewhere: left alone
        self.assertEqual(also[0], b'shared')

    def test_frames_zero_the_stream(self):
        data = bytearray(frame(agent.T_STDIN, 1, b'nolog-marker') + frame(agent.T_STDIN, 2, b'nolog-'))
        r = agent.FrameReader()
        got = list(r.feed(data[:-3]))
        self.assertEqual(got, [(agent.T_STDIN, 1, b'nolog-marker')])
        self.assertNotIn(b'marker', r.q.buf)
        self.assertEqual(list(r.feed(data[-3:])), [(agent.T_STDIN, 2, b'nolog-')])
        self.assertNotIn(b'nolog', r.q.buf)


class MessagesTest(unittest.TestCase):
    """Messages between the agent, its zygotes and their spares."""

    def setUp(self):
        self.a, self.b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(self.a.close)
        self.addCleanup(self.b.close)

    def test_round_trip_with_fds(self):
        r, w = os.pipe()
        self.addCleanup(os.close, r)
        agent.send_msg(self.a, {'id': 7, 'env': {'A': 'b'}}, b'template' * 10000, fds=[w])
        os.close(w)
        msg, blob, fds = agent.recv_msg(self.b)
        self.assertEqual(msg, {'id': 7, 'env': {'A': 'b'}})
        self.assertEqual(blob, b'template' * 10000)
        self.assertEqual(len(fds), 1)
        os.write(fds[0], b'through')
        os.close(fds[0])
        self.assertEqual(os.read(r, 100), b'through')

    def test_reader_in_pieces(self):
        data = agent.encode_msg({'spare': 12}) + agent.encode_msg({'id': 3, 'status': 0})
        reader = agent.MsgReader()
        got = []
        for i in range(len(data)):
            got.extend(reader.feed(data[i:i + 1]))
        self.assertEqual(got, [{'spare': 12}, {'id': 3, 'status': 0}])

    def test_eof(self):
        self.a.close()
        with self.assertRaises(EOFError):
            agent.recv_msg(self.b)


class FilesTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def path(self, *names):
        return os.path.join(self.dir, *names)

    def test_atomic_write(self):
        p = self.path('f')
        agent.atomic_write(p, b'one', 0o640)
        agent.atomic_write(p, b'two', 0o600)
        with open(p, 'rb') as f:
            self.assertEqual(f.read(), b'two')
        self.assertEqual(stat.S_IMODE(os.stat(p).st_mode), 0o600)
        self.assertEqual(os.listdir(self.dir), ['f'])

    def test_atomic_write_fails_whole(self):
        """A write that fails leaves the old file and no temp file."""
        p = self.path('f')
        agent.atomic_write(p, b'old', 0o644)
        with self.assertRaises(TypeError):
            agent.atomic_write(p, b'new', None)
        with open(p, 'rb') as f:
            self.assertEqual(f.read(), b'old')
        self.assertEqual(os.listdir(self.dir), ['f'])

    def test_mkdir_all(self):
        """Missing parents too, each with exactly mode whatever the umask;
        an existing directory is fine, a file in the way is not."""
        p = self.path('a', 'b', 'c')
        old = os.umask(0o077)
        try:
            agent.mkdir_all(p, 0o755)
        finally:
            os.umask(old)
        for d in (self.path('a'), self.path('a', 'b'), p):
            self.assertEqual(stat.S_IMODE(os.stat(d).st_mode), 0o755, d)
        agent.mkdir_all(p, 0o700)
        agent.atomic_write(self.path('file'), b'', 0o600)
        with self.assertRaises(OSError):
            agent.mkdir_all(self.path('file', 'sub'), 0o700)

    def test_stat_path(self):
        agent.atomic_write(self.path('f'), b'12345', 0o640)
        os.symlink('f', self.path('l'))
        st = agent.stat_path(self.path('f'))['stat']
        self.assertEqual((st['size'], stat.S_IMODE(st['mode'])), (5, 0o640))
        self.assertNotIn('target', st)
        st = agent.stat_path(self.path('l'))['stat']
        self.assertTrue(stat.S_ISLNK(st['mode']))
        self.assertEqual(st['target'], 'f')
        self.assertEqual(agent.stat_path(self.path('missing'))['errno'], 'ENOENT')

    def test_remove_all(self):
        """rm -rf: a tree, a file, a symlink to a directory (not what it
        points to), nothing."""
        agent.mkdir_all(self.path('t', 'sub'), 0o700)
        agent.atomic_write(self.path('t', 'sub', 'f'), b'x', 0o600)
        agent.mkdir_all(self.path('keep'), 0o700)
        os.symlink(self.path('keep'), self.path('link'))
        for name in ('t', 'link', 'missing'):
            agent.remove_all(self.path(name))
        self.assertEqual(os.listdir(self.dir), ['keep'])

    def test_find_tmp_root(self):
        """$TMPDIR first; one that does not exist is skipped."""
        env = dict(os.environ)
        self.addCleanup(os.environ.clear)
        self.addCleanup(os.environ.update, env)
        os.environ['TMPDIR'] = self.dir
        d, fd = agent.find_tmp_root()
        self.addCleanup(os.close, fd)
        self.assertEqual(d, self.dir)
        # The code cache's file has no name there.
        self.assertEqual(os.listdir(self.dir), [])
        self.assertEqual(os.fstat(fd).st_nlink, 0)
        os.environ['TMPDIR'] = self.path('missing')
        d, fd = agent.find_tmp_root()
        self.addCleanup(os.close, fd)
        self.assertNotEqual(d, self.path('missing'))

    def test_errinfo(self):
        try:
            os.stat(self.path('missing'))
        except OSError as e:
            info = agent._errinfo(e)
        self.assertEqual(info['errno'], 'ENOENT')
        self.assertIn('missing', info['error'])
        self.assertEqual(agent._errinfo(ValueError('bad')), {'error': 'bad', 'errno': ''})


class PolicySnapshotTest(unittest.TestCase):
    """What the become tools read, as the agent watches it: a file
    replaced, one edited in place inside a watched directory, one added;
    and blind where a directory cannot be listed."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)
        self.file = os.path.join(self.dir, 'sudoers')
        self.sub = os.path.join(self.dir, 'sudoers.d')
        os.mkdir(self.sub)
        for path in (self.file, os.path.join(self.sub, 'rules')):
            with open(path, 'w') as f:
                f.write('a\n')
        saved = agent.POLICY_FILES, agent.POLICY_DIRS, agent.POLICY_PAM
        agent.POLICY_FILES, agent.POLICY_DIRS, agent.POLICY_PAM = (self.file,), (self.sub,), ()
        self.addCleanup(lambda: setattr(agent, 'POLICY_FILES', saved[0]) or setattr(agent, 'POLICY_DIRS', saved[1])
                        or setattr(agent, 'POLICY_PAM', saved[2]))

    def changed(self, change):
        before, blind = agent.policy_snapshot()
        self.assertFalse(blind)
        change()
        return agent.policy_snapshot()[0] != before

    def test_changes_seen(self):
        def replace():
            tmp = self.file + '.new'
            with open(tmp, 'w') as f:
                f.write('b\n')
            os.rename(tmp, self.file)

        def in_place():
            # Same size, mtime forced back: the inode's ctime still moves.
            path = os.path.join(self.sub, 'rules')
            st = os.stat(path)
            with open(path, 'r+') as f:
                f.write('b\n')
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))

        def added():
            with open(os.path.join(self.sub, 'more'), 'w') as f:
                f.write('c\n')

        for change in (replace, in_place, added):
            self.assertTrue(self.changed(change), change.__name__)
        self.assertFalse(self.changed(lambda: None))

    def test_blind_where_not_listable(self):
        if os.getuid() == 0:
            self.skipTest('root lists every directory')
        os.chmod(self.sub, 0o300)
        self.addCleanup(os.chmod, self.sub, 0o700)
        self.assertTrue(agent.policy_snapshot()[1])


class ShellNewsTest(unittest.TestCase):
    """What the agent adds for a module killed by a signal is what the
    shell says: here dash's own words, from a real dash."""

    def dash(self):
        dash = shutil.which('dash')
        if dash is None:
            self.skipTest('no dash here')
        return dash

    def test_as_dash_says(self):
        dash = self.dash()
        for sig, core in ((signal.SIGKILL, False), (signal.SIGTERM, False), (signal.SIGPIPE, False),
                          (signal.SIGINT, False), (signal.SIGUSR1, False), (signal.SIGABRT, True)):
            script = 'import os, resource, signal\n'
            if core:
                script += 'resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n'
            script += 'signal.signal(signal.SIGPIPE, signal.SIG_DFL)\n'
            script += 'signal.signal(signal.SIGINT, signal.SIG_DFL)\n'
            script += 'os.kill(os.getpid(), %d)\n' % sig
            p = subprocess.run([dash, '-c', '"$0" -c "$1"', sys.executable, script],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            status = sig  # no core dumped: the limit is 0
            self.assertEqual(agent.shell_news(dash, status), p.stderr, sig)
            self.assertEqual(p.returncode, 128 + sig)
        self.assertEqual(agent.shell_news(dash, signal.SIGABRT | 0x80), b'Aborted (core dumped)\n')

    def test_other_shells_say_nothing_here(self):
        self.assertEqual(agent.shell_news('/nonexistent/bash', signal.SIGKILL), b'')


class ForgetStrTest(unittest.TestCase):

    def test_forget_str(self):
        """A str only its caller holds is overwritten in place; one held
        elsewhere too, or not ASCII, is left alone."""
        s = json.loads('"tok-%s"' % ('x' * 3))
        agent.forget_str(s)
        self.assertEqual(s, '\0' * len(s))
        kept = json.loads('"tok-kept"')
        other = [kept]
        agent.forget_str(kept)
        self.assertEqual(other[0], 'tok-kept')
        wide = json.loads('"t\u00f6k-x"')
        agent.forget_str(wide)
        self.assertEqual(wide, 't\u00f6k-x')

    def test_forget_request(self):
        req = json.loads('{"op": "exec", "cmd": "echo secret-cmd", "env": {"A": "secret-env"}}')
        env, cmd_len = req['env'], len(req['cmd'])
        agent.forget_request(req)
        self.assertEqual(req, {'op': 'exec'})
        self.assertEqual(env, {})
        self.assertEqual(cmd_len, len('echo secret-cmd'))


class TerminalTest(unittest.TestCase):

    def test_open_pty(self):
        master, slave = agent.open_pty({'rows': 33, 'cols': 101})
        try:
            rows, cols = struct.unpack('HHHH', fcntl.ioctl(slave, termios.TIOCGWINSZ, b'\0' * 8))[:2]
            self.assertEqual((rows, cols), (33, 101))
            self.assertTrue(termios.tcgetattr(slave)[1] & termios.ONLCR)
        finally:
            os.close(master)
            os.close(slave)

    def test_session_env(self):
        self.assertEqual(agent.session_env({'term': 'xterm'}, '/dev/pts/3', {'TERM': 'dumb', 'A': 'b'}),
                         {'SSH_TTY': '/dev/pts/3', 'TERM': 'dumb', 'A': 'b'})
        self.assertEqual(agent.session_env(None, None, {'A': 'b'}), {'SSH_TTY': None, 'TERM': None, 'A': 'b'})
        environ = {'TERM': 'xterm', 'SSH_TTY': '/dev/pts/1', 'K': 'v'}
        agent.apply_env(environ, agent.session_env(None, None, None))
        self.assertEqual(environ, {'K': 'v'})

    def test_session_env_through_a_become_tool(self):
        """What an agent learns from its start: on a terminal, whether the
        tool kept SSH_TTY; without one, the TERM the tool left; sudo's
        rules (SUDO_COMMAND in the environment) for the rest."""
        probe = ('import os, sys; sys.path.insert(0, %r); import agent\n'
                 'agent.learn_session_env()\n'
                 'out = repr((agent.session_env({"term": "vt100"}, "/dev/pts/9", None), agent.session_env(None, None, None)))\n'
                 'os.write(int(sys.argv[1]), out.encode())\n') % HERE
        on_pty = ('import os, pty, sys\n'
                  'r, w = os.pipe()\n'
                  'pid, fd = pty.fork()\n'
                  'if pid == 0:\n'
                  '    os.set_inheritable(w, True)\n'
                  '    os.execv(sys.executable, [sys.executable, "-c", sys.argv[1], str(w)])\n'
                  'os.close(w)\n'
                  'out = b""\n'
                  'while True:\n'
                  '    b = os.read(r, 4096)\n'
                  '    if not b:\n'
                  '        break\n'
                  '    out += b\n'
                  'os.waitpid(pid, 0)\n'
                  'sys.stdout.write(out.decode())\n')
        base = {k: v for k, v in os.environ.items() if k not in ('SSH_TTY', 'TERM', 'SUDO_COMMAND')}
        pty_on = {'SSH_TTY': '/dev/pts/9', 'TERM': 'vt100'}
        for env, terminal, want in (
                (dict(base, SSH_TTY='/dev/pts/1', TERM='xterm'), True, (pty_on, {'SSH_TTY': None, 'TERM': None})),  # su
                (dict(base, TERM='xterm', SUDO_COMMAND='x'), True, (dict(pty_on, SSH_TTY=None), {'SSH_TTY': None, 'TERM': 'unknown'})),
                (dict(base, TERM='unknown', SUDO_COMMAND='x'), False, (dict(pty_on, SSH_TTY=None), {'SSH_TTY': None, 'TERM': 'unknown'})),
                (dict(base), False, (pty_on, {'SSH_TTY': None, 'TERM': None}))):  # su, or the login's own
            if terminal:
                cmd = [sys.executable, '-c', on_pty, probe]
                out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, check=True).stdout.decode()
            else:
                r, w = os.pipe()
                p = subprocess.Popen([sys.executable, '-c', probe, str(w)], env=env, stdin=subprocess.PIPE, pass_fds=(w,))
                os.close(w)
                with os.fdopen(r, 'rb') as f:
                    out = f.read().decode()
                p.wait()
            self.assertEqual(ast.literal_eval(out), want, (env.get('SUDO_COMMAND'), terminal))


class ImportsOfTest(unittest.TestCase):

    def test_imports_of(self):
        """What a module's source imports, relative imports resolved, the
        module's own names left out; nothing for a module not found."""
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        pkg = os.path.join(d, 'abtestpkg')
        os.mkdir(pkg)
        for name, src in (('__init__.py', ''), ('mod.py', 'import os\nfrom . import sib\nfrom .sub import x as y\n'
                                                             'from abtestpkg.other import *\nimport abtestpkg.mod.inner\n')):
            with open(os.path.join(pkg, name), 'w') as f:
                f.write(src)
        sys.path.insert(0, d)
        self.addCleanup(sys.path.remove, d)
        self.addCleanup(lambda: [sys.modules.pop(m) for m in list(sys.modules) if m.startswith('abtestpkg')])
        self.assertEqual(agent.imports_of('abtestpkg.mod'),
                         ('os', 'abtestpkg', 'abtestpkg.sib', 'abtestpkg.sub', 'abtestpkg.sub.x', 'abtestpkg.other'))
        self.assertEqual(agent.imports_of('abtestpkg.missing'), ())
        self.assertEqual(agent.imports_of(''), ())

    def test_import_quietly(self):
        agent.import_quietly(('json', 'no_such_module_here', 'json.no_such'))
        self.assertIn('json', sys.modules)

    def test_import_snapshot(self):
        """A module imported from outside the stdlib is in the snapshot,
        the stdlib and the zygote's zip are not; stale() names what was
        rewritten, removed, or appeared earlier on sys.path with the name
        of a module imported, not a directory that merely changed."""
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        early, late = os.path.join(d, 'early'), os.path.join(d, 'late')
        os.mkdir(early)
        os.mkdir(late)
        mod = os.path.join(late, 'abzzstate.py')
        with open(mod, 'w') as f:
            f.write('VALUE = 1\n')
        sys.path[:0] = [early, late]
        self.addCleanup(lambda: [sys.path.remove(p) for p in (early, late)])
        self.addCleanup(sys.modules.pop, 'abzzstate', None)
        importlib.import_module('abzzstate')
        snap = agent.import_snapshot('/nonexistent.zip', ())
        paths = [e[0] for e in snap]
        self.assertIn(mod, paths)
        self.assertIn(early, paths)
        self.assertNotIn(json.__file__, paths)
        self.assertNotIn('/nonexistent.zip', paths)
        self.assertNotIn(mod, [e[0] for e in agent.import_snapshot(None, ('abzzstate',))])
        self.assertIsNone(agent.stale(snap))

        with open(mod, 'a') as f:
            f.write('VALUE = 22\n')
        self.assertEqual(agent.stale(snap), mod)
        snap = agent.import_snapshot('/nonexistent.zip', ())
        os.unlink(mod)
        self.assertEqual(agent.stale(snap), mod)
        with open(mod, 'w') as f:
            f.write('VALUE = 1\n')
        snap = agent.import_snapshot('/nonexistent.zip', ())
        self.assertIsNone(agent.stale(snap))
        # A file in an earlier directory that shadows nothing imported.
        with open(os.path.join(early, 'notes.txt'), 'w') as f:
            f.write('abzzstate\n')
        self.assertIsNone(agent.stale(snap))
        with open(os.path.join(early, 'abzzstate.py'), 'w') as f:
            f.write('VALUE = 333\n')
        self.assertEqual(agent.stale(snap), early)

    def test_startup_hook_appears(self):
        """A usercustomize.py (or sitecustomize.py) that appears on
        sys.path would run in a fresh python's site: stale() names its
        directory in the interpreter's snapshot."""
        if sys.flags.no_site or not getattr(site, 'ENABLE_USER_SITE', False):
            self.skipTest('no user site here')
        if 'usercustomize' in sys.modules:
            self.skipTest('this python has a usercustomize')
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        sys.path.append(d)
        self.addCleanup(sys.path.remove, d)
        snap = agent.interpreter_snapshot([])
        with open(os.path.join(d, 'unrelated.py'), 'w') as f:
            f.write('\n')
        self.assertIsNone(agent.stale(snap))
        with open(os.path.join(d, 'usercustomize.py'), 'w') as f:
            f.write('import os\n')
        self.assertEqual(agent.stale(snap), d)

    def test_zip_profiles(self):
        """2.19+ zips name the JSON profiles a task imports; older ones
        none; an unreadable zip gives none."""
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        got = {}
        for path in WRAPPERS:
            m = ZIP_RE.search(read(path))
            z = os.path.join(d, os.path.basename(path) + '.zip')
            with open(z, 'wb') as f:
                f.write(base64.b64decode(m.group(2)))
            got[os.path.basename(path)] = agent.zip_profiles(z)
        prefix = 'ansible.module_utils._internal._json._profiles.'
        self.assertEqual(got['ping-2.14.py.gz'], ())
        self.assertIn(prefix + '_module_legacy_m2c', got['ping-2.22.py.gz'])
        self.assertIn(prefix + '_module_legacy_c2m', got['ping-2.19.py.gz'])
        self.assertNotIn(prefix + '__init__', got['ping-2.22.py.gz'])
        self.assertEqual(agent.zip_profiles(os.path.join(d, 'missing.zip')), ())


class CompiledCodeCacheTest(unittest.TestCase):

    def test_shared_between_zips(self):
        """A module compiled from one zip is loaded, not compiled, from
        another zip with the same source, under that zip's file name;
        zipimport is as it was after restore."""
        import zipimport
        if not hasattr(zipimport, '_compile_source'):
            self.skipTest('zipimport is written in C before python 3.8')
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        cache = agent.open_unlinked(d)
        self.addCleanup(os.close, cache)
        src = 'VALUE = 42\ndef where():\n    return where.__code__.co_filename\n'
        zips = []
        for i in (1, 2):
            z = os.path.join(d, 'z%d.zip' % i)
            with zipfile.ZipFile(z, 'w') as zf:
                zf.writestr('abtestmod%d.py' % i, src)
            zips.append(z)
        orig = zipimport._compile_source

        def load(i):
            sys.path.insert(0, zips[i - 1])
            restore = agent.compile_zip_modules_once(cache)
            try:
                return importlib.import_module('abtestmod%d' % i)
            finally:
                restore()
                sys.path.remove(zips[i - 1])
                sys.modules.pop('abtestmod%d' % i, None)

        m1 = load(1)
        size = os.fstat(cache).st_size
        self.assertGreater(size, agent.CODE_REC.size)
        m2 = load(2)
        self.assertEqual(os.fstat(cache).st_size, size)
        self.assertEqual((m1.VALUE, m2.VALUE), (42, 42))
        self.assertTrue(m2.where().startswith(zips[1]), m2.where())
        self.assertIs(zipimport._compile_source, orig)


class PrefaultTest(unittest.TestCase):

    def test_page_ranges(self):
        page = os.sysconf('SC_PAGE_SIZE')
        self.assertEqual(agent.page_ranges([1, 2, 3, 7, 8, 10]),
                         [(page, 3 * page), (7 * page, 2 * page), (10 * page, page)])
        self.assertEqual(agent.page_ranges([]), [])

    def test_learn(self):
        """A report is learned unless too big; learn says whether the set
        changed (the zygote then drops its seed)."""
        pf = agent.Prefaulter()
        if pf.madvise is None:
            self.skipTest('no ctypes')
        self.assertTrue(pf.learn(array.array('Q', [5, 6, 9]).tobytes()))
        self.assertFalse(pf.learn(array.array('Q', range(100, 100 + agent.MAX_LEARN_PAGES)).tobytes()))
        self.assertEqual(sorted(pf.pages), [5, 6, 9])
        self.assertFalse(pf.learn(array.array('Q', [6, 9]).tobytes()))

    def test_learners_counted_as_given(self):
        """The first LEARN_TASKS tasks given are learners, whether or not
        their reports have come: none after them, however late those
        reports are."""
        pf = agent.Prefaulter()
        if pf.madvise is None:
            self.skipTest('no ctypes')
        given = [pf.take_learner() for _ in range(agent.LEARN_TASKS + 2)]
        self.assertEqual(given, [True] * agent.LEARN_TASKS + [False, False])

    @unittest.skipUnless(hasattr(os, 'register_at_fork'), 'python 3.7+')
    def test_prefault_first_after_fork(self):
        """A pending copy ahead runs in the child only, once, and first of
        the after-fork hooks: before random's (random comes with the
        agent's imports, as in a real agent), which reseeds, and before
        any registered later."""
        probe = ('import os, random, sys\n'
                 'order = []\n'
                 'os.register_at_fork(after_in_child=lambda: order.append("later"))\n'
                 'state = random.getstate()\n'
                 'agent.PREFAULT_AT_FORK.append(lambda: order.append(random.getstate() == state))\n'
                 'pid = os.fork()\n'
                 'if pid == 0:\n'
                 '    agent.prefault_after_fork()\n'  # as spare_main does: nothing left to run
                 '    os._exit(0 if order == [True, "later"] else 1)\n'
                 'del agent.PREFAULT_AT_FORK[:]\n'
                 'st = os.waitpid(pid, 0)[1]\n'
                 'sys.exit(1 if st else 2 if order else 0)\n')
        p = subprocess.run([sys.executable, '-c', 'import sys\n'
                            'if "random" in sys.modules: sys.exit(3)\n'
                            'sys.path.insert(0, %r); import agent\n' % HERE + probe])
        if p.returncode == 3:
            self.skipTest("this python's site imports random before any script runs")
        self.assertEqual(p.returncode, 0)


def wrapper_zip(src):
    """A temp file holding the zip of wrapper source src."""
    f = tempfile.NamedTemporaryFile(suffix='.zip')
    f.write(base64.b64decode(template(src)[1]))
    f.flush()
    return f


def spawn_observed(**popen):
    """In a fork: run true through subprocess.Popen(**popen) and say
    whether python ran its fork hooks around the spawn, which it does
    only for a preexec_fn (a fork, not a vfork)."""
    hooks = []
    os.register_at_fork(before=lambda: hooks.append(1))
    subprocess.Popen(['true'], **popen).wait()
    return 10 if hooks else 0


def noop_preexec_like_ansible(umask):
    def preexec():
        if umask:
            os.umask(umask)
    return preexec


@unittest.skipUnless(agent.SPAWNS_WITH_VFORK, 'python spawns with vfork from 3.10, on Linux')
class SpawnTest(unittest.TestCase):
    """subprocess without run_command's preexec_fn where it does nothing."""

    def test_spawns_without_noop_preexec(self):
        """A registered preexec that would do nothing gives way to vfork;
        one that sets a umask, or any other, still runs, as does the umask
        it sets."""
        def check(preexec, register):
            def fn():
                self.assertTrue(agent.spawn_without_noop_preexec())
                if register:
                    agent.NOOP_PREEXEC[preexec.__code__] = False
                return spawn_observed(preexec_fn=preexec)
            return in_child(fn)[0]
        self.assertEqual(check(noop_preexec_like_ansible(None), True), 0)
        self.assertEqual(check(noop_preexec_like_ansible(0), True), 0)
        self.assertEqual(check(noop_preexec_like_ansible(0o27), True), 10)
        self.assertEqual(check(noop_preexec_like_ansible(None), False), 10)
        self.assertEqual(check(lambda: None, True), 10)

        def umask_kept():
            agent.spawn_without_noop_preexec()
            preexec = noop_preexec_like_ansible(0o27)
            agent.NOOP_PREEXEC[preexec.__code__] = False
            out = subprocess.check_output(['sh', '-c', 'umask'], preexec_fn=preexec)
            return int(out, 8)
        self.assertEqual(in_child(umask_kept)[0], 0o27)

    def test_tracebacks_as_stock(self):
        """Errors raised through the changed Popen._execute_child read as
        python's own: same message, frames, lines."""
        def failures(patch):
            def fn():
                if patch:
                    self.assertTrue(agent.spawn_without_noop_preexec())
                import traceback
                for args in (['/nonexistent/abtest'], ['true\0'], ['true'], 5):
                    try:
                        subprocess.Popen(args, preexec_fn=None if args == ['true'] else os.getpid, cwd='/nonexistent' if args == ['true'] else None)
                    except Exception:
                        sys.stdout.write(traceback.format_exc())
                sys.stdout.flush()
            rc, out, err = in_child(fn)
            self.assertEqual((rc, err), (0, b''))
            return out.decode()
        stock = failures(False)
        self.assertEqual(stock.count('Traceback'), 4, stock)
        self.assertEqual(failures(True), stock)

    def test_run_command_preexec_of_each_version(self):
        """Each ansible-core version's run_command preexec is found to do
        nothing without a umask, and to do something with one, when its
        module's _restore_signal_handlers is overridden, or when PY2 is
        set."""
        for name, version, src in ping_wrappers():
            with self.subTest(version=version):
                skip_unless_runs(self, version)
                with wrapper_zip(src) as z:
                    rc, out, err = in_child(lambda: self.verdicts(z.name))
                self.assertEqual(rc, 0, err.decode())
                self.assertEqual(out.decode(), 'None preexec preexec preexec\n')

    def verdicts(self, zippath):
        """In a fork: what spawn_preexec makes of the zip's run_command
        preexec in each case test_run_command_preexec_of_each_version names."""
        import types
        sys.path.insert(0, zippath)
        basic = importlib.import_module('ansible.module_utils.basic')
        self.assertTrue(agent.spawn_without_noop_preexec())  # the agent's, before its zygotes
        agent.note_run_command_preexec()
        [code] = [c for c in basic.AnsibleModule.run_command.__code__.co_consts
                  if isinstance(c, types.CodeType) and c.co_name == 'preexec']

        class Overriding(basic.AnsibleModule):
            def _restore_signal_handlers(self):
                pass

        def preexec(module_class, umask):
            cells = {'self': object.__new__(module_class), 'umask': umask}
            return types.FunctionType(code, basic.__dict__, 'preexec', None,
                                      tuple(types.CellType(cells[n]) for n in code.co_freevars))
        got = [agent.spawn_preexec(preexec(basic.AnsibleModule, None)),
               agent.spawn_preexec(preexec(basic.AnsibleModule, 0o22))]
        restores = 'self' in code.co_freevars
        got.append(agent.spawn_preexec(preexec(Overriding, None)) if restores else 'preexec')
        if restores:
            basic.PY2 = True
        got.append(agent.spawn_preexec(preexec(basic.AnsibleModule, None)) if restores else 'preexec')
        print(' '.join('None' if g is None else getattr(g, '__name__', g) for g in got))


TASK_TPL = (b"import atexit, os, sys\n"
            b"ZIP = '" + agent.ZIP_MARKER + b"'\n"
            b"atexit.register(lambda: print('atexit ran'))\n"
            b"print(ZIP, sys.argv, __file__, os.environ.get('ABTEST'), os.getcwd())\n")


class ReapWithinTest(unittest.TestCase):
    """reap_within: the children that exit in time are reaped, the rest
    left running, and it returns by its deadline either way."""

    def fork(self, exit_now):
        pid = os.fork()
        if pid == 0:
            if not exit_now:
                signal.pause()
            os._exit(0)
        return pid

    def test_reaps_what_exits(self):
        done = self.fork(True)
        agent.reap_within([done], 10)
        with self.assertRaises(ChildProcessError):
            os.waitpid(done, os.WNOHANG)

    def test_leaves_what_runs(self):
        done, running = self.fork(True), self.fork(False)
        try:
            agent.reap_within(None, 0.05)
            with self.assertRaises(ChildProcessError):
                os.waitpid(done, os.WNOHANG)
            self.assertEqual(os.waitpid(running, os.WNOHANG), (0, 0))
        finally:
            os.kill(running, signal.SIGKILL)
            os.waitpid(running, 0)


class TaskTest(unittest.TestCase):
    """run_task in a fork, as a spare runs it."""

    def run_task(self, tpl, script=None, pty=None):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        r, w = os.pipe()

        def task():
            os.close(r)
            msg = {'env': {'ABTEST': 'on'}, 'cwd': d, 'script': script, 'status_fd': w}
            agent.run_task(msg, tpl, agent.WrapperCompiler(b'WklQ'), (sys.stdin, sys.stdout, sys.stderr), '/nonexistent.zip')

        rc, out, err = in_child(task)
        os.close(w)
        status = os.read(r, 16)
        os.close(r)
        return rc, status, out.decode(), err.decode(), os.path.realpath(d)

    def test_piped(self):
        rc, status, out, err, d = self.run_task(TASK_TPL + b'sys.exit(3)\n')
        self.assertEqual((rc, status, err), (3, b'3', ''))
        self.assertEqual(out, "WklQ [''] <stdin> on %s\natexit ran\n" % d)

    def test_script(self):
        rc, status, out, err, d = self.run_task(TASK_TPL, script='/tmp/AnsiballZ_ping.py')
        self.assertEqual((rc, status, err), (0, b'0', ''))
        self.assertEqual(out, "WklQ ['/tmp/AnsiballZ_ping.py'] /tmp/AnsiballZ_ping.py on %s\natexit ran\n" % d)

    def test_exit_statuses(self):
        """As python's: SystemExit's code, its message and 1, an uncaught
        exception's traceback (no agent frame in it) and 1, a syntax error
        without traceback."""
        for body, want_rc, want_err in (
                (b'raise SystemExit(None)', 0, None),
                (b'raise SystemExit(258)', 2, None),
                (b'raise SystemExit("no way")', 1, 'no way\n'),
                (b'def f():\n    raise KeyError("k")\nf()', 1, 'Traceback (most recent call last):\n  File "<stdin>", line 2, in <module>'),
                (b'def (', 1, 'SyntaxError')):
            with self.subTest(body=body):
                rc, status, out, err, _ = self.run_task(b'import sys\nsys.argv\n' + body + b'\n')
                self.assertEqual((rc, status), (want_rc, str(want_rc).encode()), err)
                if want_err is None:
                    self.assertEqual(err, '')
                else:
                    self.assertIn(want_err.split('\n')[0], err)
                self.assertNotIn('agent', err)
                self.assertNotIn('_exec_main', err)

    def test_uncaught_like_python(self):
        """An uncaught exception goes through sys.excepthook as python's
        own: a SystemExit the hook raises (ansible-core 2.14's file module
        calls fail_json there) is the exit, a hook that fails is reported
        with the original, the hook runs with no exception being handled,
        a missing hook is said. Status, stdout and stderr are those of
        python reading the same script on stdin."""
        for body in (
                b'def hook(*a):\n    print(sys.exc_info()[0], a[0].__name__)\n    sys.exit(1)\n'
                b'sys.excepthook = hook\nraise ValueError("v")',
                b'sys.excepthook = lambda *a: sys.exit("bye")\nraise ValueError("v")',
                b'sys.excepthook = lambda *a: 1 / 0\nraise ValueError("v")',
                b'sys.excepthook = lambda *a: print(sys.exc_info()[0])\nraise ValueError("v")',
                b'del sys.excepthook\nraise ValueError("v")',
                b'sys.excepthook = lambda *a: sys.exit(4)\ndef (',
        ):
            with self.subTest(body=body):
                script = b'import sys\n' + body + b'\n'
                p = subprocess.Popen([sys.executable, '-'], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=dict(os.environ, ABTEST='on'))
                out, err = p.communicate(script)
                rc, status, got_out, got_err, _ = self.run_task(script)
                self.assertEqual((rc, status, got_out, got_err), (p.returncode, str(p.returncode).encode(), out.decode(), err.decode()))

    def test_keyboard_interrupt(self):
        """An uncaught KeyboardInterrupt: python 3.8+ prints it and dies by
        SIGINT (a shell running it says 130), before 3.8 exits 1."""
        script = b'import sys\nraise KeyboardInterrupt\n'
        p = subprocess.Popen([sys.executable, '-'], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = p.communicate(script)
        rc, status, got_out, got_err, _ = self.run_task(script)
        self.assertEqual((rc, got_out, got_err), (p.returncode, out.decode(), err.decode()))
        want = 128 + signal.SIGINT if sys.version_info >= (3, 8) else 1
        self.assertEqual(status, str(want).encode())

    def test_flush_failure(self):
        """A clean exit whose stdout cannot be flushed is 120, as python's."""
        rc, status, _, err, _ = self.run_task(b'import os, sys\nsys.stdout.write("x")\nos.close(1)\n')
        self.assertEqual((rc, status), (120, b'120'), err)


class AgentTableTest(unittest.TestCase):

    def test_ops(self):
        for op, name in agent.Agent.OPS.items():
            self.assertTrue(callable(getattr(agent.Agent, name, None)), (op, name))


# ---------------------------------------------------------------- whole agent

RUN_AGENT = ("import sys\n"
             "src = open(sys.argv[1]).read()\n"
             "exec(compile(src, '<ansible-bridge-agent>', 'exec'), {'__name__': '__ansible_bridge_agent__'})\n")


class AgentProcess(object):
    """The agent in a child process, spoken to over its stdin and stdout
    as interp's Client does."""

    TIMEOUT = 60

    def __init__(self, testcase, env=None):
        self.dir = tempfile.mkdtemp()
        testcase.addCleanup(shutil.rmtree, self.dir, True)
        self.stderr = tempfile.TemporaryFile()
        env = dict(os.environ, TMPDIR=self.dir, **(env or {}))
        self.p = subprocess.Popen([sys.executable, '-c', 'import os; os.write(1, b"login noise\\n"); ' + RUN_AGENT.replace('\n', '; ').replace(';  ', ''), AGENT],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                  cwd=self.dir, env=env)
        testcase.addCleanup(self.close)
        self.buf = b''
        self.next_id = 1
        while agent.MAGIC not in self.buf:
            self.fill()
        self.buf = self.buf[self.buf.index(agent.MAGIC) + len(agent.MAGIC):]
        typ, rid, payload = self.read_frame()
        assert (typ, rid) == (agent.T_RESP, 0), (typ, rid)
        self.hello, _ = agent.decode_request(payload)

    def fill(self):
        ready, _, _ = select.select([self.p.stdout], [], [], self.TIMEOUT)
        if not ready:
            raise AssertionError('agent silent for %ds; stderr: %s' % (self.TIMEOUT, self.errors()))
        data = os.read(self.p.stdout.fileno(), 65536)
        if not data:
            raise AssertionError('agent ended; stderr: %s' % self.errors())
        self.buf += data

    def read_frame(self):
        while len(self.buf) < agent.HDR.size:
            self.fill()
        n, typ, rid = agent.HDR.unpack_from(self.buf)
        while len(self.buf) < 4 + n:
            self.fill()
        payload = self.buf[agent.HDR.size:4 + n]
        self.buf = self.buf[4 + n:]
        return typ, rid, payload

    def send(self, typ, rid, payload=b''):
        self.p.stdin.write(frame(typ, rid, payload))
        self.p.stdin.flush()

    def start(self, req, blob=b''):
        rid = self.next_id
        self.next_id += 1
        js = json.dumps(req).encode()
        self.send(agent.T_REQ, rid, agent.U32.pack(len(js)) + js + blob)
        return rid

    def wait(self, rid):
        """The response to rid: (JSON, blob, stdout, stderr)."""
        out, err = b'', b''
        while True:
            typ, r, payload = self.read_frame()
            assert r == rid, (r, rid)
            if typ == agent.T_STDOUT:
                out += payload
            elif typ == agent.T_STDERR:
                err += payload
            else:
                assert typ == agent.T_RESP, typ
                resp, blob = agent.decode_request(payload)
                return resp, blob, out, err

    def call(self, req, blob=b''):
        return self.wait(self.start(req, blob))

    def errors(self):
        if self.stderr.closed:
            return ''
        self.stderr.seek(0)
        return self.stderr.read().decode('utf-8', 'replace')

    def close(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            try:
                self.p.wait(self.TIMEOUT)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.p.stdout.close()
        self.stderr.close()


class AgentProcessTest(unittest.TestCase):
    """The whole agent, as Go's Client drives it, without Go."""

    def test_hello(self):
        a = AgentProcess(self)
        self.assertEqual(a.hello['protocol'], agent.PROTOCOL)
        self.assertEqual(a.hello['python'], '%d.%d.%d' % sys.version_info[:3])
        self.assertEqual(a.hello['tmpdir'], a.dir)
        self.assertEqual(a.call({'op': 'ping'})[0], {})
        self.assertEqual(a.call({'op': 'nonsense'})[0], {'error': "unknown op 'nonsense'"})
        a.close()
        self.assertEqual(a.p.returncode, 0)
        self.assertEqual(os.listdir(a.dir), [])

    def test_files(self):
        a = AgentProcess(self)
        d = os.path.join(a.dir, 'x', 'y')
        f = os.path.join(d, 'f')
        self.assertEqual(a.call({'op': 'mkdir', 'path': d, 'mode': 0o750})[0], {})
        self.assertEqual(a.call({'op': 'put', 'path': f, 'mode': 0o600}, b'data\x00')[0], {})
        self.assertEqual(a.call({'op': 'chmod', 'path': f, 'mode': 0o640})[0], {})
        resp, blob, _, _ = a.call({'op': 'get', 'path': f})
        self.assertEqual((resp, blob), ({}, b'data\x00'))
        st = a.call({'op': 'stat', 'path': f})[0]['stat']
        self.assertEqual((st['size'], st['mode'] & 0o7777), (5, 0o640))
        resp = a.call({'op': 'get', 'path': f + '.missing'})[0]
        self.assertEqual(resp['errno'], 'ENOENT')
        a.start({'op': 'rmtree', 'path': os.path.join(a.dir, 'x'), 'noreply': True})
        self.assertEqual(a.call({'op': 'stat', 'path': d})[0]['errno'], 'ENOENT')

    def test_exec(self):
        a = AgentProcess(self)
        rid = a.start({'op': 'exec', 'cmd': 'cat; echo "$ABTEST" >&2; exit 3', 'env': {'ABTEST': 'e'}, 'stdin': True})
        a.send(agent.T_STDIN, rid, b'in')
        a.send(agent.T_STDIN, rid, b'put')
        a.send(agent.T_STDIN_EOF, rid)
        resp, _, out, err = a.wait(rid)
        self.assertEqual((resp, out, err), ({'exit': 3}, b'input', b'e\n'))

    def test_exec_pty(self):
        a = AgentProcess(self)
        resp, _, out, err = a.call({'op': 'exec', 'cmd': 'echo "$TERM"; stty size', 'pty': {'term': 'vt100', 'rows': 30, 'cols': 90}})
        self.assertEqual((resp, out, err), ({'exit': 0}, b'vt100\r\n30 90\r\n', b''))

    def test_exec_pty_not_controlling(self):
        """noctty: the terminal is stdio only, as for su -c's command."""
        a = AgentProcess(self)
        cmd = 'test -t 0 && echo stdin-tty; (: </dev/tty) 2>/dev/null && echo ctty || echo no-ctty'
        for pty, want in (({}, b'stdin-tty\r\nctty\r\n'), ({'noctty': True}, b'stdin-tty\r\nno-ctty\r\n')):
            with self.subTest(pty=pty):
                resp, _, out, err = a.call({'op': 'exec', 'cmd': cmd, 'pty': pty})
                self.assertEqual((resp, out, err), ({'exit': 0}, want, b''))

    def test_cancel(self):
        a = AgentProcess(self)
        rid = a.start({'op': 'exec', 'cmd': 'echo started; exec sleep 60'})
        while b'started' not in a.buf:
            a.fill()
        a.send(agent.T_CANCEL, rid)
        resp, _, out, _ = a.wait(rid)
        self.assertEqual(resp, {'exit': 128 + signal.SIGKILL, 'signal': signal.SIGKILL, 'cancelled': True})

    def test_module(self):
        """A real ping wrapper, three tasks (the first through the zygote,
        later ones through the spare it hands over): pong each time."""
        usable = [p for p in WRAPPERS if os.path.basename(p).startswith('ping-')
                  and sys.version_info[:2] >= MIN_PYTHON[os.path.basename(p)[5:-6]]]
        if not usable:
            self.skipTest('no ansible-core here runs on this python')
        tpl, b64 = template(read(usable[-1]))
        zip_ = base64.b64decode(b64)
        digest = hashlib.sha256(zip_).hexdigest()
        a = AgentProcess(self)
        resp = a.call({'op': 'module', 'hash': digest, 'tpl': 0})[0]
        self.assertEqual(resp.get('code'), 'nozip', resp)
        for i in range(3):
            with self.subTest(task=i):
                ctpl = zlib.compress(tpl)
                req = {'op': 'module', 'hash': digest, 'zip': len(zip_) if i == 0 else 0, 'tpl': len(ctpl)}
                req['params'], time_, req['payload'] = spans(tpl)
                if time_ is not None:
                    req['time'] = time_
                if i == 0:
                    # As Go's client sends them with the whole template.
                    req['fqn'], req['name'] = 'ansible.modules.ping', 'ping'
                resp, _, out, err = a.call(req, (zip_ if i == 0 else b'') + ctpl)
                # The freshness check's time, in microseconds.
                self.assertGreaterEqual(resp.pop('check_us', 0), 0)
                self.assertEqual(resp, {'exit': 0}, err)
                self.assertEqual(json.loads(out.decode().strip().splitlines()[-1]).get('ping'), 'pong', out)
        # Between tasks nothing of theirs or the agent's is on disk, as
        # after stock's (PayloadDirTest: while one runs).
        self.assertEqual(os.listdir(a.dir), [])
        a.close()
        self.assertEqual(os.listdir(a.dir), [])

    def test_module_sees_changed_import(self):
        """A module importing a file that changes between tasks sees it as
        it is when each task starts, as a fresh python would: the zygote
        that imported it is replaced."""
        lib = os.path.join(self.tmp(), 'lib')
        os.mkdir(lib)
        state = os.path.join(lib, 'abzzstate.py')
        zip_, digest, ctpl = runpy_module('abzzmod', 'import abzzstate\nprint(abzzstate.VALUE)\n')
        a = AgentProcess(self, env={'PYTHONPATH': lib})
        got = []
        for i, value in enumerate(('1', '22', None, '333')):
            if value is None:
                os.unlink(state)
            else:
                with open(state, 'w') as f:
                    f.write('VALUE = %s\n' % value)
            req = {'op': 'module', 'hash': digest, 'zip': len(zip_) if i == 0 else 0, 'tpl': len(ctpl)}
            if i == 0:
                req['fqn'] = 'abzzmod'
            resp, _, out, err = a.call(req, (zip_ if i == 0 else b'') + ctpl)
            got.append((resp.get('exit'), out.decode().strip() or err.decode().strip().splitlines()[-1]))
        self.assertEqual(got, [(0, '1'), (0, '22'), (1, "ModuleNotFoundError: No module named 'abzzstate'"), (0, '333')])

    def test_first_task_env_not_kept(self):
        """The environment value of the task that made a zygote is not
        left in the zygote (nor so in the spares it forks), as a later
        task's is not."""
        zip_, digest, ctpl = runpy_module('abzzenv', 'import os\nprint(len(os.environ.get("ABZZ_TOKEN", "")))\n')
        a = AgentProcess(self)
        markers = []
        for i in range(3):
            # Made here, never in this file's text: the scan finds only copies.
            marker = 'ZYGENV-%d-' % i + 'q' * 3 + str(os.getpid())
            markers.append(marker.encode())
            req = {'op': 'module', 'hash': digest, 'zip': len(zip_) if i == 0 else 0, 'tpl': len(ctpl),
                   'env': {'ABZZ_TOKEN': 'http://u:%s@proxy:3128' % marker}}
            if i == 0:
                req['fqn'] = 'abzzenv'
            resp, _, out, err = a.call(req, (zip_ if i == 0 else b'') + ctpl)
            self.assertEqual((resp.get('exit'), out.strip()), (0, str(len(req['env']['ABZZ_TOKEN'])).encode()), err)
            del req
        # The second task's start went through the zygote after the
        # first's (or to a spare it forked after): the first is handled.
        zygotes = children(a.p.pid)
        self.assertTrue(zygotes)
        for pid in zygotes:
            found = [m for m in markers[:2] if mem_has(pid, m)]
            self.assertEqual(found, [], 'zygote %d' % pid)

    def tmp(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d, True)
        return d



class PayloadDirTest(unittest.TestCase):
    """A zip's payload dir (named as stock's wrapper names its own) is on
    disk while a task runs and gone once it ended, as stock's; one whose
    task ended without getting to the wrapper's finally (os._exit, a
    kill) is left, as stock's is."""

    LIST = ('import glob, json, os\n'
            'print(json.dumps(sorted(os.path.relpath(p, os.environ["TMPDIR"]) for p in\n'
            '      glob.glob(os.path.join(os.environ["TMPDIR"], "ansible_*_payload_*", "*")))))\n')

    def task(self, a, name, zip_, digest, ctpl, first):
        req = {'op': 'module', 'hash': digest, 'zip': len(zip_) if first else 0, 'tpl': len(ctpl)}
        if first:
            req['fqn'], req['name'] = name, name
        resp, _, out, err = a.call(req, (zip_ if first else b'') + ctpl)
        return resp.get('exit'), out.decode(), err.decode()

    def left(self, a):
        return sorted(n for n in os.listdir(a.dir) if n.startswith(('ansible', '.ansible')))

    def test_between_tasks(self):
        a = AgentProcess(self)
        mods = [('abplist', self.LIST), ('abpother', 'print("x")\n')]
        zips = [runpy_module(n, src) for n, src in mods]
        seen = set()
        for i in range(3):
            for (name, _), (zip_, digest, ctpl) in zip(mods, zips):
                code, out, err = self.task(a, name, zip_, digest, ctpl, i == 0)
                self.assertEqual(code, 0, err)
                if name == 'abplist':
                    got = json.loads(out)
                    self.assertEqual(len(got), 1, got)
                    self.assertRegex(got[0], r'^ansible_abplist_payload_[a-z0-9_]{8}/ansible_abplist_payload\.zip$')
                    seen.add(got[0])
                self.assertEqual(self.left(a), [])
        # The zygote imports from one path: the same each time.
        self.assertEqual(len(seen), 1, seen)
        a.close()
        self.assertEqual(self.left(a), [])

    def test_exit_without_finally(self):
        a = AgentProcess(self)
        zip_, digest, ctpl = runpy_module('abpexit', 'import os\nos._exit(3)\n')
        lzip, ldigest, lctpl = runpy_module('abplist', self.LIST)
        for i in range(2):
            self.assertEqual(self.task(a, 'abpexit', zip_, digest, ctpl, i == 0)[0], 3)
            self.assertEqual(len(self.left(a)), i + 1, self.left(a))
        left = self.left(a)
        # Another module's dir goes as before.
        code, out, err = self.task(a, 'abplist', lzip, ldigest, lctpl, True)
        self.assertEqual(code, 0, err)
        self.assertEqual(len(json.loads(out)), 3, out)
        self.assertEqual(self.left(a), left)
        a.close()
        self.assertEqual(self.left(a), left)


class InterpreterSnapshotTest(unittest.TestCase):
    """What a fresh python would find changed: the interpreter a named
    word resolves to, and a site-packages directory that appeared."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def test_symlink_repointed(self):
        link = os.path.join(self.dir, 'python3')
        os.symlink(sys.executable, link)
        snap = agent.interpreter_snapshot(['/usr/bin/env', 'FOO=bar', link])
        self.assertIsNone(agent.stale(snap))
        os.unlink(link)
        os.symlink('/bin/sh', link)
        self.assertEqual(agent.stale(snap), link)

    def test_user_site_appears(self):
        import site
        user_site = os.path.join(self.dir, 'site-packages')
        saved = site.getusersitepackages
        site.getusersitepackages = lambda: user_site
        self.addCleanup(setattr, site, 'getusersitepackages', saved)
        snap = agent.interpreter_snapshot([])
        self.assertIsNone(agent.stale(snap))
        os.mkdir(user_site)
        self.assertEqual(agent.stale(snap), user_site)

if __name__ == '__main__':
    unittest.main()
