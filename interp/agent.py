# ansible-bridge agent: a persistent Python interpreter on a target.
#
# Started by the bootstrap first stage (package bootstrap), which execs this
# source with __name__ == '__ansible_bridge_agent__'. It speaks the framed,
# multiplexed protocol of package interp on private copies of stdin/stdout;
# fds 0 and 1 are pointed at /dev/null so stray prints cannot corrupt it.
#
# Must stay compatible with Python 3.6 and use only the standard library.
# Single-threaded on purpose: everything is driven by one selectors loop,
# so os.fork() (zygotes, tasks) is always safe.
#
# Three kinds of process run this code: the agent (class Agent), a zygote
# per module zip (ZygoteServer, forked from the agent), and the spares a
# zygote forks ahead, each of which runs one task (run_task). One file, in
# sections from the bottom of that stack up: protocol, limits, frames, files,
# wrappers, warm-up, prefault, task, zygote, agent (why one file:
# interp/doc.go). Unit tests: interp/agent_test.py.

import os

# A spare's copy ahead (Prefaulter) runs as the first of python's after-fork
# hooks: before the rest of the fork's return (the other hooks, the code
# up to spare_main) writes the very pages it would copy, each in a fault
# of its own. Registered before the imports below register theirs
# (threading's, random's), as hooks run in the order registered.
PREFAULT_AT_FORK = []


def prefault_after_fork():
    """Run the copy ahead fork_spare left for this fork, once."""
    if PREFAULT_AT_FORK:
        PREFAULT_AT_FORK.pop()()


if hasattr(os, 'register_at_fork'):  # python 3.7+
    os.register_at_fork(after_in_child=prefault_after_fork)

import array
import atexit
import base64
import builtins
import errno
import fcntl
import hashlib
import io
import json
import marshal
import pwd
import selectors
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import termios
import time
import zlib

# ---------------------------------------------------------------- protocol
# The values of interp/protocol.go (Protocol, Magic, the frame* types,
# headerSize, maxFrame): TestAgentConstants (Go) and ProtocolConstantsTest
# (agent_test.py) check that both sides agree.

PROTOCOL = 1
MAGIC = b'\x00ANSIBLE-BRIDGE-AGENT-1\n'

# Frame types, T_<NAME> for Go's frame<Name>. Type 1 is reserved; the
# hello is a response to request id 0.
T_REQ = 2
T_RESP = 3
T_STDIN = 4
T_STDIN_EOF = 5
T_STDOUT = 6
T_STDERR = 7
T_CANCEL = 8
T_WRITTEN = 9

# A frame: uint32 length | uint8 type | uint32 request id | payload, the
# length counting type, id and payload.
HDR = struct.Struct('>IBI')
MAX_FRAME = 1 << 30
U32 = struct.Struct('>I')

# ---------------------------------------------------------------- limits
# Sizes, counts, paths and markers.

CHUNK = 65536
# Stop reading child output while this much is queued for the client.
OUT_HIGH = 4 << 20

# Go's zipMarker (interp/module.go): where a template's zip goes.
ZIP_MARKER = b'@@ANSIBLE_BRIDGE_ZIPDATA@@'
ENV_FILES = ('/etc/environment', '~/.pam_environment')
# What the login shell reads for each command sshd runs through it (bash
# when run by sshd, zsh, csh and fish always): a change restarts the
# agent, started anew through that shell, as each of stock's commands is.
SHELL_FILES = {
    'bash': ('/etc/bash.bashrc', '~/.bashrc'),
    'zsh': ('/etc/zsh/zshenv', '~/.zshenv'),
    'tcsh': ('/etc/csh.cshrc', '~/.tcshrc', '~/.cshrc'),
    'csh': ('/etc/csh.cshrc', '~/.cshrc'),
    'fish': ('/etc/fish/config.fish', '/etc/fish/conf.d', '~/.config/fish/config.fish',
             '~/.config/fish/conf.d'),
}

# What sudo, su and doas read each time they run to decide whether the
# login user may become another (policy, PAM, limits, passwords, groups).
# A become interpreter runs many steps after one run of its tool: a
# change here retires it, so the next step runs the tool again. A
# directory counts itself (entries added, removed, renamed into place)
# and, where readable, its entries (edits in place).
POLICY_FILES = (
    '/etc/sudoers', '/etc/sudo.conf', '/etc/doas.conf',
    '/etc/passwd', '/etc/group', '/etc/shadow', '/etc/gshadow',
    '/etc/nsswitch.conf', '/etc/login.defs', '/etc/pam.d',
    '/etc/security', '/etc/security/access.conf', '/etc/security/limits.conf',
    '/etc/security/time.conf', '/etc/security/group.conf')
POLICY_DIRS = ('/etc/sudoers.d', '/etc/security/limits.d')
POLICY_PAM = ('sudo', 'sudo-i', 'su', 'su-l', 'doas', 'other', 'common-auth',
              'common-account', 'common-session', 'common-session-noninteractive')
RESOLV = '/etc/resolv.conf'
PASSWD = '/etc/passwd'
# Zygotes per agent; the least recently used one is retired beyond this.
MAX_ZYGOTES = 8
MAX_FD = 65536
# Linux 5.14+: fault a range in writable, as a write to each page would
# (copying those shared with the zygote), without changing its contents.
MADV_POPULATE_WRITE = 23
# A zygote learns which pages its first tasks copy on write; later spare
# forks copy those while they wait, off the request's path.
LEARN_TASKS = 3
# A zygote forks its next spare once the task its last one took has
# exited, so that the fork and its copy-ahead take no CPU from that task
# (-8 % of the targets' CPU on a 100-item loop, A/B); or this long (s)
# after, if the task runs on.
SPARE_WAIT = 0.05
# A task that came to own more pages than this (16 MiB of 4 KiB pages)
# did something unusual: its pages are not copied ahead for every task.
MAX_LEARN_PAGES = 4096
# A seed running as root pins the learned pages as io_uring buffers: fork
# then copies a pinned page into the child at once (Linux 5.9+), which
# costs a fraction of MADV_POPULATE_WRITE's copy, whose every page takes
# a fault's path and a TLB flush. The syscall numbers are the generic
# table's (every architecture but alpha and mips); the parameters' size
# has not changed since Linux 5.1.
IO_URING_SETUP = 425
IO_URING_REGISTER = 427
IORING_REGISTER_BUFFERS = 0
IO_URING_PARAMS_SIZE = 120
IO_URING_ARCHES = ('x86_64', 'aarch64', 'armv7l', 'armv6l', 'i686', 'i386',
                   'ppc64le', 'ppc64', 's390x', 'riscv64', 'loongarch64')
CAP_IPC_LOCK = 14
PAGEMAP_PRESENT = 1 << 63
PAGEMAP_EXCLUSIVE = 1 << 56
# The size of an fd in SCM_RIGHTS ancillary data.
FD_SIZE = struct.calcsize('i')
FD_RECORD = struct.Struct('i')
# A seed's answer (a spare's pid) and its exit reports (pid, waitpid status).
PID_RECORD = struct.Struct('i')
EXIT_RECORD = struct.Struct('ii')
# How long (s) a zygote waits for its seed's spare before forking one
# itself (a stopped seed must not stop the zygote).
SEED_WAIT = 10
# SIGHUP as this python found it (ignored under nohup): what its tasks
# get back, the agent and its zygotes having changed it.
SIGHUP_AT_START = signal.getsignal(signal.SIGHUP)
# How long (s) a process leaving waits for its children to exit, so that
# their exits go to it and not to the target's init, which may reap
# nothing (a container's PID 1): a zygote for its seed and spares, the
# agent (longer) for its zygotes.
ZYGOTE_TEARDOWN = 1.0
AGENT_TEARDOWN = 2.0
# How long (s) a zygote whose agent is gone waits for its tasks to exit
# before it leaves them running (the agent may have seen a task's end
# before its process exited).
TASK_EXIT_WAIT = 0.5
# What AnsiballZ wrappers import, plus ast (the agent's own literal parsing)
# and the codec zipfile decodes member names with.
WRAPPER_IMPORTS = ('ast', 'base64', 'runpy', 'shutil', 'tempfile', 'zipfile', 'json', 'resource', 'traceback',
                   'encodings.cp437', 'datetime')
# What ansible-core 2.19+'s wrapper imports from the zip (absent before).
ZIP_IMPORTS_219 = ('ansible.module_utils._internal._ansiballz._loader',)
# Where 2.19+'s zip keeps the serialization profiles, one imported per task.
ZIP_PROFILES = 'ansible/module_utils/_internal/_json/_profiles/_'


# ---------------------------------------------------------------- frames
# Frames between the client and the agent; messages (encode_msg) between
# the agent, its zygotes and their spares.
#
# What passes through here may be a task's arguments or its output
# (no_log), and the agent and its zygotes live as long as their
# connection. CPython leaves what a process drops in its freed memory, so
# bytes that may hold those are kept in mutable buffers (ByteQueue, and
# bytearrays read into with readv and recv_into) and overwritten once
# done with, and payloads are never concatenated into temporary copies.

def zero(buf):
    """Overwrite buf (a bytearray or a writable memoryview) in place."""
    put(buf, 0, bytes(len(buf)))


def put(buf, at, data):
    """Copy data into the bytearray (or writable view) buf at offset at,
    through a memoryview: a bytearray's own slice assignment first copies
    a value that is not a bytearray into a temporary one, which it frees
    unwiped."""
    memoryview(buf)[at:at + len(data)] = data


def forget_bytes(b):
    """Overwrite b, an immutable bytes object its caller made, holds the
    only reference to and drops next: zlib's output, the one copy of a
    task's template the agent cannot make mutable. CPython only (where
    bytes.__basicsize__ ends one byte into the data); a no-op without
    ctypes."""
    if type(b) is not bytes or len(b) < 2 or sys.getrefcount(b) > _sole_refs():
        return  # referred to elsewhere too: not ours to wipe
    _zero_at(id(b) + bytes.__basicsize__ - 1, len(b))


def forget_str(s):
    """Overwrite s, an ASCII str its caller made (json or marshal did),
    holds the only reference to and drops next: an environment value or a
    command line of a request. CPython's compact ASCII layout only (the
    characters start where an empty str's NUL is); a no-op otherwise."""
    if type(s) is not str or len(s) < 2 or sys.getrefcount(s) > _sole_refs() or not _ascii(s):
        return  # referred to elsewhere too (or immortal, or interned): not ours to wipe
    _zero_at(id(s) + sys.getsizeof('') - 1, len(s))


def _zero_at(addr, n):
    """Overwrite n bytes at addr (an immutable object's data; a no-op
    without ctypes)."""
    try:
        import ctypes
    except ImportError:
        return
    ctypes.memset(addr, 0, n)


def _ascii(s):
    if hasattr(s, 'isascii'):
        return s.isascii()
    return all(ord(c) < 128 for c in s)  # python 3.6


def forget_request(req):
    """Overwrite a handled request's environment values and command line
    (forget_str): they may be a no_log task's."""
    env = req.pop('env', None)
    if isinstance(env, dict):
        for k in list(env):
            v = env.pop(k)
            forget_str(v)
            del v
    cmd = req.pop('cmd', None)
    forget_str(cmd)


def _sole_refs(_n=[]):
    """What getrefcount shows in forget_bytes for an object only its
    caller refers to (3, or 4 where a call's frame holds one more)."""
    if not _n:
        def probe(b):
            return sys.getrefcount(b)
        x = bytes(bytearray(b'xx'))
        _n.append(probe(x))
    return _n[0]


class ByteQueue(object):
    """A byte FIFO in one bytearray, which overwrites bytes as they leave
    it and the buffer it outgrows."""

    def __init__(self, size):
        self.size = size
        self.buf = bytearray()
        self.start = self.end = 0

    def __len__(self):
        return self.end - self.start

    def append(self, data):
        n = len(data)
        if self.end + n > len(self.buf):
            live = self.end - self.start
            mv = memoryview(self.buf)
            if live + n <= len(self.buf):
                mv[:live] = mv[self.start:self.end]  # memmove: no temporary copy
                zero(mv[live:self.end])
            else:
                new = bytearray(max(self.size, 2 * len(self.buf), live + n))
                put(new, 0, mv[self.start:self.end])
                zero(mv[self.start:self.end])
                self.buf = new
            self.start, self.end = 0, live
        put(self.buf, self.end, data)
        self.end += n

    def view(self):
        """The bytes queued; valid until the next append or consume."""
        return memoryview(self.buf)[self.start:self.end]

    def consume(self, n):
        zero(memoryview(self.buf)[self.start:self.start + n])
        self.start += n
        if self.start == self.end:
            self.start = self.end = 0
            if len(self.buf) > 4 * self.size:
                self.buf = bytearray()  # zeroed already: give a burst's memory back

    def clear(self):
        self.consume(len(self))


class ProtocolError(Exception):
    """The client's byte stream is not frames."""


class FrameReader(object):
    """Splits the client's byte stream into frames."""

    def __init__(self):
        self.q = ByteQueue(1 << 18)

    def feed(self, data):
        """Add data; yield each complete frame as (type, request id,
        payload), leaving a partial one for the next feed. payload is a
        bytearray of its own, for the caller to zero once handled."""
        q = self.q
        q.append(data)
        while len(q) >= HDR.size:
            n, typ, rid = HDR.unpack_from(q.buf, q.start)
            if n < 5 or n > MAX_FRAME:
                raise ProtocolError('bad frame length %d' % n)
            if len(q) < 4 + n:
                break
            payload = bytearray(memoryview(q.buf)[q.start + HDR.size:q.start + 4 + n])
            q.consume(4 + n)
            yield typ, rid, payload


def decode_request(payload):
    """A request frame's payload (uint32 JSON length | JSON | blob) as
    (JSON value, blob), blob a view of payload."""
    jl = U32.unpack_from(payload)[0]
    # Decoded from a view: a slice of payload would be a copy (payload
    # itself is zeroed by the caller).
    text = str(memoryview(payload)[4:4 + jl], 'utf-8')
    value = json.loads(text)
    forget_str(text)
    return value, memoryview(payload)[4 + jl:]


# Messages carry their value in marshal's format, not JSON: their ends are
# one python (the agent and its forks), and json's encoder and decoder,
# partly Python code, write to ~90 pages after a fork where marshal writes
# to ~10 (each a page copied in a zygote, every fork cycle).

def encode_msg(obj, blob=b''):
    """A length-prefixed message, in one bytearray: uint32 size | uint32
    value size | value (marshal) | blob."""
    val = marshal.dumps(obj)
    out = bytearray(8 + len(val) + len(blob))
    U32.pack_into(out, 0, 4 + len(val) + len(blob))
    U32.pack_into(out, 4, len(val))
    put(out, 8, val)
    put(out, 8 + len(val), blob)
    forget_bytes(val)  # a task's environment may be in it
    return out


def send_msg(sock, obj, blob=b'', fds=None):
    """Blocking length-prefixed message on a unix stream socket; the copy
    of blob it makes is zeroed once sent."""
    data = encode_msg(obj, blob)
    try:
        view = memoryview(data)
        if fds:
            n = sock.sendmsg([view], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack('%di' % len(fds), *fds))])
            view = view[n:]
        if view:
            sock.sendall(view)
    finally:
        zero(data)


def recv_exact(sock, n):
    """n bytes from sock, read into one bytearray."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if not k:
            raise EOFError
        got += k
    return buf


def fds_of(anc):
    """The fds passed in recvmsg's ancillary data anc (SCM_RIGHTS)."""
    fds = []
    for level, typ, cdata in anc:
        if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            cnt = len(cdata) // FD_SIZE
            fds.extend(struct.unpack('%di' % cnt, cdata[:cnt * FD_SIZE]))
    return fds


def recv_msg(sock):
    """Blocking read of one message and the fds sent with its first byte:
    (value, blob, fds), blob a writable view for the caller to zero."""
    fds = []
    hdr = b''
    while len(hdr) < 4:
        data, anc, _flags, _addr = sock.recvmsg(4 - len(hdr), socket.CMSG_SPACE(8 * FD_SIZE))
        if not data:
            raise EOFError
        hdr += data
        fds.extend(fds_of(anc))
    body = recv_exact(sock, U32.unpack(hdr)[0])
    jl = U32.unpack_from(body)[0]
    view = memoryview(body)
    value = marshal.loads(view[4:4 + jl])
    zero(view[4:4 + jl])
    return value, view[4 + jl:], fds


class MsgReader(object):
    """Non-blocking reader of length-prefixed messages (zygote -> agent)."""

    def __init__(self):
        self.buf = bytearray()

    def feed(self, data):
        self.buf += data
        out = []
        while len(self.buf) >= 4:
            n = U32.unpack(self.buf[:4])[0]
            if len(self.buf) < 4 + n:
                break
            body = bytes(self.buf[4:4 + n])
            del self.buf[:4 + n]
            jl = U32.unpack(body[:4])[0]
            out.append(marshal.loads(body[4:4 + jl]))
        return out


def warn(text):
    """A line on the agent's stderr (the client logs it)."""
    try:
        os.write(2, ('ansible-bridge agent: %s\n' % (text,)).encode('utf-8', 'replace'))
    except OSError:
        pass  # stderr is closed: nowhere to say it


# ---------------------------------------------------------------- files
# Files and directories as the requests want them; processes and terminals.

def _errinfo(e):
    code = getattr(e, 'errno', None)
    name = errno.errorcode.get(code, '') if code else ''
    return {'error': str(e), 'errno': name}


def _mtime(path):
    try:
        return os.stat(os.path.expanduser(path)).st_mtime_ns
    except OSError:
        return None


def _noexec(path):
    try:
        flags = os.statvfs(path).f_flag
    except OSError:
        return True
    return bool(flags & getattr(os, 'ST_NOEXEC', 8))


def find_tmp_root():
    """The temp root (Ansible's search order: TMPDIR/TEMP/TMP, /tmp,
    /var/tmp, /usr/tmp, cwd) and the agent's compiled-code cache there, a
    file already unlinked (CodeCache): nothing of the agent's own is
    seen in the target's filesystem."""
    cands = []
    for var in ('TMPDIR', 'TEMP', 'TMP'):
        v = os.environ.get(var)
        if v:
            cands.append(v)
    cands += ['/tmp', '/var/tmp', '/usr/tmp']
    try:
        cands.append(os.getcwd())
    except OSError:
        pass  # the cwd was removed: not a candidate
    for d in cands:
        if not os.path.isdir(d) or not os.access(d, os.W_OK | os.X_OK):
            continue
        if _noexec(d):
            continue
        try:
            return d, open_unlinked(d)
        except OSError:
            continue
    raise RuntimeError('no writable, exec-mountable temp dir in %r' % (cands,))


def open_unlinked(d):
    """An fd (O_APPEND) of a new file in d that no name reaches."""
    flags = os.O_RDWR | os.O_APPEND | getattr(os, 'O_CLOEXEC', 0)
    tmpfile = getattr(os, 'O_TMPFILE', 0)
    if tmpfile:
        try:
            return os.open(d, flags | tmpfile, 0o600)
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
    # A file system without O_TMPFILE: named for a moment.
    fd, path = tempfile.mkstemp(prefix='.ansible-bridge-', dir=d)
    try:
        os.unlink(path)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)
    except OSError:
        os.close(fd)
        raise
    return fd


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def atomic_write(path, data, mode, owner=None):
    d, base = os.path.split(path)
    fd, tmp = tempfile.mkstemp(prefix='.' + base + '.', dir=d or '.')
    try:
        write_all(fd, data)
        if owner:
            os.fchown(fd, owner[0], owner[1])
        os.fchmod(fd, mode)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.rename(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass  # cleanup only: the error being raised is what to report
        raise


def mkdir_all(path, mode, owner=None):
    """mkdir -p; directories created get exactly mode (no umask), and
    owner (uid, gid) if given."""
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path.rstrip('/'))
    if parent and parent != path and not os.path.isdir(parent):
        mkdir_all(parent, mode, owner)
    try:
        os.mkdir(path, 0o700)
    except OSError as e:
        if e.errno != errno.EEXIST or not os.path.isdir(path):
            raise
        return
    if owner:
        os.chown(path, owner[0], owner[1])
    os.chmod(path, mode)


def stat_path(path):
    """lstat's answer for path ({'stat': {...}}, with a symlink's target),
    or its error."""
    try:
        st = os.lstat(path)
    except OSError as e:
        return _errinfo(e)
    info = {'mode': st.st_mode, 'size': st.st_size, 'mtime_ns': st.st_mtime_ns,
            'uid': st.st_uid, 'gid': st.st_gid}
    if stat.S_ISLNK(st.st_mode):
        try:
            info['target'] = os.readlink(path)
        except OSError:
            pass  # replaced since the lstat: the link's mode and size only
    return {'stat': info}


def remove_all(path):
    """rm -rf path: a directory with its contents, anything else (a
    symlink to a directory too) unlinked; no error if it does not exist."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
        return
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass  # already gone, as rm -f would have it


_SHELL_IS_DASH = {}


def shell_news(shell, status):
    """What the shell stock runs a module's python under (`shell -c`)
    prints when that python dies of a signal, as bytes (b'' if nothing or
    not known here). dash, Debian's /bin/sh, forks even a lone command and
    reports a signal's death but SIGINT's and SIGPIPE's: strsignal's text
    (at most 32 bytes), " (core dumped)" if it dumped core, a newline."""
    dash = _SHELL_IS_DASH.get(shell)
    if dash is None:
        dash = _SHELL_IS_DASH[shell] = os.path.basename(os.path.realpath(shell)) == 'dash'
    sig = os.WTERMSIG(status)
    if not dash or sig in (signal.SIGINT, signal.SIGPIPE):
        return b''
    text = strsignal(sig)
    if text is None:
        return b''
    line = text.encode('utf-8', 'replace')[:32]
    if os.WCOREDUMP(status):
        line += b' (core dumped)'
    return line + b'\n'


def strsignal(sig):
    """libc's strsignal(sig), or None."""
    if hasattr(signal, 'strsignal'):
        return signal.strsignal(sig)
    try:
        import ctypes
        f = ctypes.CDLL(None).strsignal
    except (ImportError, OSError, AttributeError):
        return None
    f.restype = ctypes.c_char_p
    f.argtypes = (ctypes.c_int,)
    text = f(sig)
    return text.decode('utf-8', 'replace') if text else None


def _set_nonblock(fd):
    os.set_blocking(fd, False)


def drain(fd):
    """Read a non-blocking wakeup pipe empty."""
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass  # drained


def close_fds_except(*keep):
    """Close every fd from 3 up except those in keep."""
    lo = 3
    for fd in sorted(keep):
        os.closerange(lo, fd)
        lo = fd + 1
    os.closerange(lo, MAX_FD)


def open_pty(pty):
    """A new pseudo-terminal (master, slave) for the request's pty spec,
    with its window size if given and the kernel's default modes (as sshd
    leaves them when the client sends none: ONLCR, ECHO...)."""
    master, slave = os.openpty()
    try:
        rows, cols = int(pty.get('rows') or 0), int(pty.get('cols') or 0)
        if rows > 0 and cols > 0:
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack('HHHH', rows, cols, 0, 0))
    except BaseException:
        os.close(master)
        os.close(slave)
        raise
    return master, slave


# What a task's own ssh session would put in its environment through the
# tool that started this agent (Agent sets these as it starts, from how it
# was started): whether a task on a terminal gets sshd's SSH_TTY (sudo's
# env_reset drops it, su keeps it), and the TERM of a task without a
# terminal (sshd sets none; sudo then sets "unknown"). An interpreter
# started on a terminal must not hand its TERM to a later task without
# one, nor one started without a terminal SSH_TTY to a task on one.
TASK_SSH_TTY = True
TERM_NO_PTY = None


def learn_session_env():
    """Set TASK_SSH_TTY and TERM_NO_PTY from this process's start: what
    it found tells where it can, sudo's own rules where it cannot."""
    global TASK_SSH_TTY, TERM_NO_PTY
    by_sudo = 'SUDO_COMMAND' in os.environ
    if os.isatty(0):
        TASK_SSH_TTY = 'SSH_TTY' in os.environ
        TERM_NO_PTY = 'unknown' if by_sudo else None
    else:
        TASK_SSH_TTY = not by_sudo
        TERM_NO_PTY = os.environ.get('TERM')


def session_env(pty, tty, env):
    """TERM and SSH_TTY as the task's own session would have them (None:
    unset), for a terminal session (pty, its slave's name tty) or a plain
    one (pty None), under env (the VAR=value prefixes of the command
    line)."""
    if pty is not None:
        out = {'TERM': pty.get('term') or TERM_NO_PTY, 'SSH_TTY': tty if TASK_SSH_TTY else None}
    else:
        out = {'TERM': TERM_NO_PTY, 'SSH_TTY': None}
    out.update(env or {})
    return out


def apply_env(environ, env):
    """Set env's variables in environ, and unset those it maps to None."""
    for k, v in env.items():
        if v is None:
            environ.pop(k, None)
        else:
            environ[k] = v


# ---------------------------------------------------------------- wrappers
# An AnsiballZ wrapper is compiled once per shape; a task swaps in its
# parameters, its zip and its file name.

# What varies from task to task in a template: the module parameters'
# literal (ANSIBALLZ_PARAMS = '...' inside _ansiballz_main up to
# ansible-core 2.18, the params='...', argument of its call from 2.19) and,
# from 2.19, the task's start time (date_time=datetime.datetime(...), also
# an argument of the call). Go's package interp/ansiballz finds them, in
# every format; a module request gives their offsets in the template
# ('params' and 'time', [start, end]), which travel with the task as its
# spans, with its payload lines' (see PAYLOAD_LINES): [params, time,
# payload], each may be None.
PARAMS_MARKER = '@@ANSIBLE_BRIDGE_PARAMS@@'
DATETIME_MARKER = '@@ANSIBLE_BRIDGE_DATETIME@@'
DATETIME_HEAD = b'datetime.datetime('
DATETIME_TAIL = b', tzinfo=datetime.timezone.utc)'


def task_spans(msg):
    """The spans of a task message (or module request)."""
    return [msg.get('params'), msg.get('time'), msg.get('payload')]


def blank_params(tpl, span):
    """Overwrite, in tpl (a bytearray or writable view), the parameters'
    literal at span with a str literal of spaces of the same length, as
    Go's blankParams (interp/module.go) does: the shape a zygote learns,
    and the base template later deltas apply to when the first task was
    no_log, without a task's arguments."""
    if span is None:
        return
    start, stop = span
    if 0 <= start and stop - start >= 2 and stop <= len(tpl):
        put(tpl, start, b"'" + b' ' * (stop - start - 2) + b"'")


def shape_digest(tpl, params, time_at):
    """What WrapperCompiler.learn keys a template's shape on, as a digest:
    the template without its parameters' and time literals."""
    h = hashlib.sha256()
    at = 0
    for span in sorted(s for s in (params, time_at) if s is not None):
        h.update(memoryview(tpl)[at:span[0]])
        h.update(b'\0')
        at = span[1]
    h.update(memoryview(tpl)[at:])
    return h.digest()


# What a single-quoted str literal may hold and stand for itself: no
# quote, backslash or control character (repr(), as Ansible writes the
# parameters' literal, escapes those).
PLAIN_LITERAL_BYTES = bytes(b for b in range(0x20, 0x100) if b not in b"'\\\x7f")


def str_literal(text):
    """The str that text, a Python str literal in UTF-8 source, stands
    for, or None if it is not one. Parameters repr() wrote without escapes
    need no parsing: ast's parser would make a task copy ~45 more pages
    of its zygote's."""
    if len(text) >= 2 and text[:1] == text[-1:] == b"'" and not text[1:-1].translate(None, PLAIN_LITERAL_BYTES):
        try:
            return text[1:-1].decode('utf-8')
        except UnicodeDecodeError:
            return None  # not UTF-8: python would not compile it either
    import ast
    try:
        value = ast.literal_eval(text.decode('utf-8'))
    except (ValueError, SyntaxError):
        return None
    return value if type(value) is str else None


def task_time(expr):
    """The value of the task's start time expr gives, or None: 2.19+'s
    datetime (DATETIME_HEAD int, ... DATETIME_TAIL), or before that a
    tuple of ints."""
    try:
        if expr.startswith(b'(') and expr.endswith(b')'):
            return tuple(int(x) for x in expr[1:-1].split(b','))
        if not (expr.startswith(DATETIME_HEAD) and expr.endswith(DATETIME_TAIL)):
            return None
        import datetime
        return datetime.datetime(*[int(x) for x in expr[len(DATETIME_HEAD):-len(DATETIME_TAIL)].split(b',')],
                                 tzinfo=datetime.timezone.utc)
    except (ValueError, TypeError):
        return None


# The wrapper's payload work, line by line: it writes the zip it holds to a
# fresh temp dir, appends a sitecustomize.py to it, runs the module from it
# and removes the dir, about a millisecond per task. A zygote already has
# that zip on disk (its forks import from it), so a cached shape runs the
# module from there instead: each of those lines gives way to a line that
# does without the file work. Lines keep their numbers, so a traceback
# through the wrapper reads as stock's. Go's package interp/ansiballz finds
# the lines (Wrapper.Payload: z = zipfile.ZipFile(...), z.writestr(...),
# z.close(), temp_path = ...mkdtemp(...), zipped_mod = os.path.join(...),
# with open(zipped_mod, 'wb') as modlib:, shutil.rmtree(temp_path...)), each
# exactly once or none; a module request gives their spans in the template,
# indentation left out ('payload'), in the order of these replacements.
# {zip} in a replacement is the zygote's zip path.
PAYLOAD_LINES = (b'pass', b'pass', b'pass', b'temp_path = None', b'zipped_mod = {zip}', b'if 0:', b'pass')


def _swap_consts(code, swaps, hits, fname):
    """code with str constants replaced per swaps and fname as its file
    name, in nested code too."""
    consts = []
    for c in code.co_consts:
        if type(c) is str and c in swaps:
            hits[c] = hits.get(c, 0) + 1
            c = swaps[c]
        elif isinstance(c, type(code)):
            c = _swap_consts(c, swaps, hits, fname)
        consts.append(c)
    return code.replace(co_consts=tuple(consts), co_filename=fname)


class WrapperCompiler(object):
    """Compiles AnsiballZ wrapper templates for one zip.

    A template differs from task to task only in its parameters' literal
    and its start time (2.19+'s date_time argument, before that the time
    sitecustomize.py's zip entry gets). With those and
    the zip literal replaced by markers,
    the compiled code is the same for every task of a playbook run: it is
    cached (the zygote fills the cache, its forks inherit it), and a task
    gets its code by swapping the two marker constants for the real
    values (and the file name: without pipelining each task's script has
    a path of its own), which gives the code compiling the full ~140 KB
    source would, in a few microseconds instead of a millisecond or two. Where that is
    not possible (python < 3.8 has no code.replace; a template of another
    shape) the full source is compiled."""

    MAX = 16

    def __init__(self, b64, zippath=None):
        self.b64 = b64
        self.b64s = b64.decode('ascii')
        self.zippath = zippath  # the zip on disk: cached shapes run the module from it
        self.cache = {}
        self.ok = hasattr(type(self.__init__.__code__), 'replace')

    def _split(self, tpl, spans):
        """tpl with its per-task literals (at spans) replaced by markers
        (the cache key), and the values of those literals by marker."""
        params_at, time_at, payload_at = spans or (None, None, None)
        if params_at is None or not self.ok:
            return None, None
        # (span, marker, None), or (span, None, a payload line's replacement)
        at = [(params_at, PARAMS_MARKER, None)]
        if time_at is not None:
            at.append((time_at, DATETIME_MARKER, None))
        if self.zippath is not None and payload_at and len(payload_at) == len(PAYLOAD_LINES):
            zlit = repr(self.zippath).encode('utf-8')
            for i, repl in enumerate(PAYLOAD_LINES):
                at.append((payload_at[i], None, repl.replace(b'{zip}', zlit)))
        # From the last: splicing one leaves the offsets before it.
        at.sort(key=lambda a: a[0][0], reverse=True)
        key, values, end = tpl, {}, len(tpl)
        for (start, stop), marker, repl in at:
            if not 0 <= start < stop <= end:
                return None, None
            end = start
            if repl is not None:
                key = key[:start] + repl + key[stop:]
                continue
            text = tpl[start:stop]
            if marker == PARAMS_MARKER:
                value = str_literal(text)
                if value is None:
                    return None, None  # not a literal this can swap: the full source is compiled
            else:
                value = task_time(text)
                if value is None:
                    return None, None
            values[marker] = value
            key = key[:start] + repr(marker).encode('ascii') + key[stop:]
        return key, values

    def _compile_key(self, key):
        try:
            return compile(key, '<ansible-bridge-template>', 'exec', dont_inherit=True)
        except SyntaxError:
            return None

    def learn(self, tpl, spans):
        """In the zygote: compile tpl's shape for later tasks; whether
        that is new."""
        key, _ = self._split(tpl, spans)
        if key is None or key in self.cache:
            return False
        if len(self.cache) >= self.MAX:
            self.cache.clear()
        code = self._compile_key(key)
        if code is None:
            return False
        self.cache[key] = code
        return True

    def compile(self, tpl, fname, spans):
        """The code of tpl with its zip literal holding the zip."""
        key, values = self._split(tpl, spans)
        if key is not None:
            code = self.cache.get(key)
            if code is None:
                code = self._compile_key(key)
            if code is not None:
                hits = {}
                swaps = dict(values)
                swaps[ZIP_MARKER.decode('ascii')] = self.b64s
                code = _swap_consts(code, swaps, hits, fname)
                if hits == dict.fromkeys(swaps, 1):
                    return code
        return compile(tpl.replace(ZIP_MARKER, self.b64, 1), fname, 'exec', dont_inherit=True)


# ---------------------------------------------------------------- warm-up
# What a zygote imports and compiles before its first task.

def imports_of(fqn):
    """The modules fqn's source imports (module_utils, stdlib), found
    without running it. Some names are of attributes rather than modules;
    importing those fails, which the caller ignores."""
    if not fqn:
        return ()
    try:
        import ast
        import importlib.util
        spec = importlib.util.find_spec(fqn)
        tree = ast.parse(spec.loader.get_source(fqn))
    except Exception:
        # find_spec runs the __init__ of fqn's packages, and the source
        # may be missing or not parse: anything can fail, and the task
        # reports it when it runs the module. Nothing is imported ahead.
        return ()
    package = fqn.rpartition('.')[0]
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                parts = package.split('.')
                base = '.'.join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            names.append(base)
            names.extend(base + '.' + a.name for a in node.names if a.name != '*')
    out = []
    for n in names:
        if n and n != fqn and not n.startswith(fqn + '.') and n not in out:
            out.append(n)
    return tuple(out)


def zip_profiles(zippath):
    """The JSON profile modules in an ansible-core 2.19+ zip: the wrapper's
    run_module imports the task's profile by name, which imports_of cannot
    see; left to the task, that import took 2-3 ms of each one."""
    import zipfile
    try:
        with zipfile.ZipFile(zippath) as z:
            names = z.namelist()
    except (OSError, zipfile.BadZipFile):
        return ()  # the task reports an unreadable zip when it runs
    return tuple(n[:-3].replace('/', '.') for n in names
                 if n.startswith(ZIP_PROFILES) and n.endswith('.py') and '/__' not in n)


def import_quietly(names):
    """Import each of names, going on past those that fail: the task that
    needs one reports its error as python would."""
    import importlib
    for name in names:
        try:
            importlib.import_module(name)
        except BaseException:
            # Module code run at import can raise anything (SystemExit
            # included); and some names are attributes, not modules.
            continue


# A record of CodeCache: magic, the source's SHA-1, the length of the
# marshalled code that follows.
CODE_REC = struct.Struct('>4s20sI')
CODE_MAGIC = b'ABc1'


class CodeCache(object):
    """Compiled code by its source's SHA-1, shared by the agent's zygotes:
    records appended (O_APPEND, one write each) to a file the agent opened
    unlinked (open_unlinked) before forking them, so that no file of the
    agent's is seen in the target's file system. A record is read only
    once the file's size covers it (another zygote may be writing it); a
    bad one turns the cache off (each module is then compiled)."""

    def __init__(self, fd):
        self.fd = fd
        self.index = {}  # digest -> (offset, length)
        self.end = 0  # where the records indexed end

    def _scan(self):
        size = os.fstat(self.fd).st_size
        while self.end + CODE_REC.size <= size:
            magic, key, n = CODE_REC.unpack(os.pread(self.fd, CODE_REC.size, self.end))
            if magic != CODE_MAGIC:
                self.fd = None
                return
            start = self.end + CODE_REC.size
            if start + n > size:
                return
            self.index[key] = (start, n)
            self.end = start + n

    def get(self, key):
        """The data stored under key, or None."""
        try:
            if self.fd is not None and key not in self.index:
                self._scan()
            at = self.index.get(key)
            if at is None or self.fd is None:
                return None
            data = os.pread(self.fd, at[1], at[0])
        except (OSError, struct.error):
            return None
        return data if len(data) == at[1] else None

    def put(self, key, data):
        if self.fd is None:
            return
        rec = CODE_REC.pack(CODE_MAGIC, key, len(data)) + data
        try:
            n = os.write(self.fd, rec)
        except OSError:
            n = 0
        if n != len(rec):
            self.fd = None  # cut short (no space): later records would not line up


def compile_zip_modules_once(cache_fd):
    """Until the function returned is called, have zipimport compile each
    module of a zip once. It compiles a module for get_filename (which
    importlib asks for to build the module's spec) and again for get_code
    (python 3.8+, where zipimport is written in Python): that second pass
    was ~40 ms of a zygote's ~100 ms start. Compiled code is also kept in
    the agent's CodeCache (cache_fd) by its source, for the zygotes of
    other zips: modules share most of module_utils, and loading it is
    ~30 ms quicker than compiling it. The code objects are the same either
    way (the file name is set to this zip's); tasks get zipimport as it
    was."""
    try:
        import zipimport
        orig = zipimport._get_module_code
        orig_compile = zipimport._compile_source
    except (ImportError, AttributeError):
        return lambda: None
    memo = {}
    cache = CodeCache(cache_fd)

    def compile_source(pathname, source):
        key = hashlib.sha1(source).digest()
        data = cache.get(key)
        if data is not None:
            try:
                return _swap_consts(marshal.loads(data), {}, {}, pathname)
            except (EOFError, ValueError, TypeError):
                pass  # unreadable: compiled below
        code = orig_compile(pathname, source)
        cache.put(key, marshal.dumps(code))
        return code

    def get_module_code(self, fullname):
        key = (self.archive, self.prefix, fullname)
        res = memo.pop(key, None)
        if res is None:
            res = orig(self, fullname)
            memo[key] = res
        return res

    def restore():
        zipimport._get_module_code = orig
        zipimport._compile_source = orig_compile
        memo.clear()
    zipimport._get_module_code = get_module_code
    zipimport._compile_source = compile_source
    return restore


def cache_module_code(fqn):
    """Let runpy find fqn's code compiled: the wrapper runs the module with
    runpy.run_module, whose loader would otherwise read and compile its
    source for every task. Only zipimport loaders written in Python
    (3.8+) take the shortcut; the code object is immutable, so every task
    still starts from a fresh module namespace."""
    try:
        import importlib.util
        spec = importlib.util.find_spec(fqn)
        loader = spec.loader
        code = loader.get_code(fqn)
        filename = loader.get_filename(fqn)
        orig_code, orig_filename = loader.get_code, loader.get_filename
    except Exception:
        # find_spec runs the __init__ of fqn's packages and get_code
        # compiles the module: whatever fails, the task reports it when it
        # runs the module.
        return

    # zipimport compiles the source for get_filename too (find_spec asks
    # for it), so both are answered from the cache.
    def get_code(name):
        return code if name == fqn else orig_code(name)

    def get_filename(name):
        return filename if name == fqn else orig_filename(name)
    try:
        loader.get_code = get_code
        loader.get_filename = get_filename
    except AttributeError:
        pass  # a loader written in C (zipimport before 3.8): each task compiles the module


def stat_key(path):
    """What says a file or directory changed: its device, inode, size,
    mtime and ctime (ns, as a list, which stale compares); None if it is
    gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def login_env_files():
    """ENV_FILES, and the login shell's own (SHELL_FILES)."""
    try:
        shell = os.path.basename(pwd.getpwuid(os.getuid()).pw_shell)
    except KeyError:
        shell = ''
    return ENV_FILES + SHELL_FILES.get(shell, ())


def policy_snapshot():
    """The stat keys of what the become tools read (POLICY_FILES), and
    whether a directory among them could not be read (an edit in place
    inside it goes unseen)."""
    keys = [stat_key(p) for p in POLICY_FILES]
    keys.extend(stat_key('/etc/pam.d/' + n) for n in POLICY_PAM)
    blind = False
    for d in POLICY_DIRS:
        keys.append(stat_key(d))
        try:
            names = sorted(os.listdir(d))
        except OSError as e:
            blind = blind or e.errno != errno.ENOENT
            continue
        keys.extend([n, stat_key(os.path.join(d, n))] for n in names)
    return keys, blind


def import_snapshot(zippath=None, skip=(), dirs=True):
    """What this process's imports depend on, as [path, stat_key, names]
    entries: each file of a module imported beyond the standard library
    and zippath (and not named in skip), names None; and if dirs, each
    directory on sys.path (names: the top-level modules imported from it
    or from a later entry, which a file appearing in it would shadow) or
    holding one of those files (names None: any change counts). A fresh
    python would import what changed since; stale() says whether
    anything did."""
    stdlib = os.path.dirname(os.path.realpath(os.__file__)) + os.sep
    cwd = os.getcwd()
    entries = [os.path.join(cwd, p) if p else cwd for p in sys.path if p != zippath]
    files = set()
    found = {}  # top-level module name -> index in entries it came from
    for name, m in list(sys.modules.items()):
        f = getattr(m, '__file__', None)
        if not isinstance(f, str) or not os.path.isabs(f):
            continue
        if zippath and f.startswith(zippath + os.sep):
            continue
        top = name.partition('.')[0]
        for i, e in enumerate(entries):
            if f.startswith(e.rstrip(os.sep) + os.sep):
                found[top] = min(found.get(top, i), i)
                break
        if name in skip:
            continue
        real = os.path.realpath(f)
        # A venv's or pyenv's site-packages lies under its stdlib directory.
        rest = real[len(stdlib) - 1:]
        if real.startswith(stdlib) and os.sep + 'site-packages' + os.sep not in rest \
                and os.sep + 'dist-packages' + os.sep not in rest:
            continue
        files.add(f)
    out = [[f, stat_key(f), None] for f in sorted(files)]
    if dirs:
        for i, e in enumerate(entries):
            out.append([e, stat_key(e), sorted(n for n, at in found.items() if at >= i)])
        for d in sorted(set(os.path.dirname(f) for f in files) - set(entries)):
            out.append([d, stat_key(d), None])
    return out


def interpreter_snapshot(named):
    """What a fresh start of this python would find changed, as
    import_snapshot entries: what the words Ansible named it with (the
    agent's arguments) resolve to and the interpreter itself (a symlink
    repointed, a wrapper or binary replaced, one deleted: stock's next
    step runs the new one, or fails), and the site-packages directories
    that site left off sys.path for not being there (pip install --user
    makes the user's: stock's next step imports from it), and the
    directories on sys.path where a startup hook site found none of
    (sitecustomize, usercustomize) may appear."""
    paths = [sys.executable]
    for w in named:
        if '=' in w.partition('/')[0]:
            continue  # env's VAR=value
        paths.append(w if '/' in w else shutil.which(w))
    entries = [[p, stat_key(p), None] for p in paths if p]
    try:
        import site
        dirs = list(getattr(site, 'getsitepackages', list)())
        if site.ENABLE_USER_SITE is not False:
            dirs.append(site.getusersitepackages())
    except Exception:
        dirs = []
    entries.extend([d, None, None] for d in dirs if d not in sys.path and stat_key(d) is None)
    # The hooks site runs as a python starts, where it found none: a fresh
    # start runs one that appears in a directory of sys.path (not in the
    # script's or the working directory, which go on it later).
    hooks = []
    if 'site' in sys.modules and not sys.flags.no_site:
        user = getattr(sys.modules['site'], 'ENABLE_USER_SITE', False)
        hooks = [h for h, on in (('sitecustomize', True), ('usercustomize', user)) if on and h not in sys.modules]
    if hooks:
        entries.extend([d, stat_key(d), hooks] for d in sys.path if d)
    return entries


def stale(snapshot):
    """The first path of snapshot (import_snapshot) that changed, or None.
    A sys.path directory that changed counts only if a name in it now
    could shadow a module imported (a playbook writing files to the
    login directory, '' on sys.path, leaves the zygote alone); its entry
    is updated otherwise, so that it is listed once per change."""
    for entry in snapshot:
        path, key, names = entry
        now = stat_key(path)
        if now == key:
            continue
        if names is None or now is None or key is None:
            return path
        try:
            listing = os.listdir(path)
        except OSError:
            return path
        if not isinstance(names, frozenset):
            names = entry[2] = frozenset(names)
        if any(n.partition('.')[0] in names for n in listing):
            return path
        entry[1] = now
    return None


def res_init():
    """Have libc re-read /etc/resolv.conf (glibc >= 2.26 also notices by
    itself; other libcs may not)."""
    try:
        import ctypes
        libc = ctypes.CDLL(None)
    except (ImportError, OSError):
        return  # no ctypes here: lookups keep the configuration read first
    for name in ('__res_init', 'res_init'):
        f = getattr(libc, name, None)
        if f is not None:
            f()
            return


# ---------------------------------------------------------------- spawning
# Ansible's run_command hands subprocess a preexec_fn that, on python 3,
# does nothing unless it is given a umask (before 2.18 it also calls
# _restore_signal_handlers, which acts on python 2 only). Any preexec_fn
# makes python fork the task's whole address space and run python in the
# child before the exec; without one, python 3.10+ spawns with vfork. The
# program, fds, environment, cwd, umask and signal dispositions it execs
# with are the same either way.

# The run_command preexec functions this zygote's basic.py defines, found
# by their bytecode to be these (as this python compiles them): code
# object -> whether it calls self._restore_signal_handlers first.
NOOP_PREEXEC = {}
# The AnsibleModule._restore_signal_handlers found to be this one.
NOOP_RESTORE = []
# The sources below as this python compiles them, once subprocess is
# changed (in the agent, for every zygote): 'restore' the code of
# RESTORE_SOURCE's function, 'preexec' (calls restore?, code) pairs.
NOOP_REFERENCES = {}
# (Module imports as in basic.py: python 3.11+ compiles a call of an
# imported module's function differently.)
PREEXEC_SOURCES = (
    (False, 'import os\n'
            'def run_command(umask):\n'
            '    def preexec():\n'
            '        if umask:\n'
            '            os.umask(umask)\n'),
    (True, 'import os\n'
           'def run_command(self, umask):\n'
           '    def preexec():\n'
           '        self._restore_signal_handlers()\n'
           '        if umask:\n'
           '            os.umask(umask)\n'),
)
RESTORE_SOURCE = ('import signal, sys\n'
                  'def _restore_signal_handlers(self):\n'
                  '    if PY2 and sys.platform != "win32":\n'
                  '        signal.signal(signal.SIGPIPE, signal.SIG_DFL)\n')
SPAWN_PLACEHOLDER = '\0ansible-bridge: spawn_preexec'
SPAWNS_WITH_VFORK = sys.version_info >= (3, 10) and sys.platform.startswith('linux')


def _code_consts(code, name):
    return [c for c in code.co_consts if isinstance(c, type(code)) and c.co_name == name]


def _names(code):
    """The global and attribute names code and the code in it use."""
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, type(code)):
            names |= _names(c)
    return names


def _same_body(a, b):
    """Whether two code objects do the same, line numbers aside."""
    return (a.co_code == b.co_code and a.co_consts == b.co_consts and a.co_names == b.co_names
            and a.co_varnames == b.co_varnames and a.co_freevars == b.co_freevars)


def spawn_preexec(fn):
    """fn, or None where fn is a run_command preexec that would do
    nothing. Never raises, and runs no code of fn's."""
    if type(fn) is not type(spawn_preexec):
        return fn
    try:
        restores = NOOP_PREEXEC.get(fn.__code__)
        if restores is None:
            return fn
        cells = dict(zip(fn.__code__.co_freevars, fn.__closure__))
        umask = cells['umask'].cell_contents
        if umask is not None and not (type(umask) is int and umask == 0):
            return fn
        if restores and not _restores_nothing(cells['self'].cell_contents):
            return fn
        return None
    except Exception:
        return fn


def _restores_nothing(module):
    """Whether module._restore_signal_handlers() is the one found to do
    nothing on python 3, and PY2 is still False; without running any of
    module's code (no attribute lookup hooks)."""
    if '_restore_signal_handlers' in object.__getattribute__(module, '__dict__'):
        return False
    for klass in type(module).__mro__:
        f = klass.__dict__.get('_restore_signal_handlers')
        if f is not None:
            return any(f is r for r in NOOP_RESTORE) and f.__globals__.get('PY2') is False
    return False


def note_run_command_preexec():
    """Find which of basic.py's run_command preexec functions (and its
    _restore_signal_handlers) do nothing on python 3."""
    if not NOOP_REFERENCES:
        return  # subprocess is as it was: nothing would use them
    basic = sys.modules.get('ansible.module_utils.basic')
    cls = getattr(basic, 'AnsibleModule', None)
    run_command = getattr(cls, '__dict__', {}).get('run_command')
    code = getattr(run_command, '__code__', None)
    if code is None:
        return
    restore = cls.__dict__.get('_restore_signal_handlers')
    if getattr(restore, '__code__', None) is not None and _same_body(restore.__code__, NOOP_REFERENCES['restore']) \
            and restore.__globals__.get('PY2') is False:
        NOOP_RESTORE.append(restore)
    for restores, ref in NOOP_REFERENCES['preexec']:
        for c in _code_consts(code, 'preexec'):
            if _same_body(c, ref):
                NOOP_PREEXEC[c] = restores


def spawn_without_noop_preexec():
    """Have subprocess.Popen (python 3.10+, Linux) spawn without a
    preexec_fn that spawn_preexec finds does nothing. The change is one
    statement at the top of Popen._execute_child's own code, recompiled
    from its source with its line numbers and columns, so that a
    traceback through it reads as stock's. Done only where recompiling
    the source unchanged gives back exactly the code python has."""
    if not SPAWNS_WITH_VFORK:
        return False
    import ast
    import warnings
    func = subprocess.Popen.__dict__.get('_execute_child')
    code = getattr(func, '__code__', None)
    try:
        lines = subprocess.__loader__.get_source(subprocess.__name__).splitlines(True)
    except Exception:
        return False  # no source: leave it as it is
    if code is None or code.co_freevars or code.co_firstlineno < 3:
        return False
    first = code.co_firstlineno
    last = max(line for _, _, line in code.co_lines() if line is not None)
    indent = len(lines[first - 1]) - len(lines[first - 1].lstrip())
    while last < len(lines) and (not lines[last].strip() or
                                 len(lines[last]) - len(lines[last].lstrip()) > indent):
        last += 1
    # The class and a block around the def give it the qualified name and
    # indentation it has in the file; the blank lines its line numbers; an
    # import of each module it names, its calls (python 3.11+ compiles a
    # call of an imported module's function as an attribute, not a method).
    imports = '; '.join('import %s' % n for n in sorted(_names(code))
                        if isinstance(vars(subprocess).get(n), type(subprocess)))
    src = (imports + '\n' * (first - 3) + 'class Popen:\n if 1:\n' +
           ''.join(lines[first - 1:last]))

    def compiled(tree):
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')  # calling a str constant: the placeholder
            mod = compile(tree, code.co_filename, 'exec')
        return _code_consts(_code_consts(mod, 'Popen')[0], '_execute_child')[0]
    try:
        tree = ast.parse(src, code.co_filename)
        fdef = tree.body[-1].body[0].body[0]
        if compiled(tree) != code or [a.arg for a in fdef.args.args[:4]] != ['self', 'args', 'executable', 'preexec_fn']:
            return False
        at = 1 if ast.get_docstring(fdef) is not None else 0
        stmt = ast.parse('preexec_fn = PLACEHOLDER(preexec_fn)').body[0]
        stmt.value.func = ast.Constant(SPAWN_PLACEHOLDER)
        for node in ast.walk(stmt):
            ast.copy_location(node, fdef.body[at])
        fdef.body.insert(at, stmt)
        new = compiled(tree)
    except Exception:
        return False
    hits = {}
    new = _swap_consts(new, {SPAWN_PLACEHOLDER: spawn_preexec}, hits, code.co_filename)
    if hits != {SPAWN_PLACEHOLDER: 1}:
        return False
    func.__code__ = new
    NOOP_REFERENCES['restore'] = _code_consts(compile(RESTORE_SOURCE, '<ref>', 'exec'), '_restore_signal_handlers')[0]
    NOOP_REFERENCES['preexec'] = [
        (restores, _code_consts(_code_consts(compile(src, '<ref>', 'exec'), 'run_command')[0], 'preexec')[0])
        for restores, src in PREEXEC_SOURCES]
    return True


# ---------------------------------------------------------------- prefault
# The pages a spare copies on write while it waits, instead of its task.

def own_pages():
    """The pages of this process's private writable mappings that no
    other process maps, as a sorted list of page numbers: in a task forked
    from a zygote, those it copied on write (and those it added)."""
    size = os.sysconf('SC_PAGE_SIZE')
    pages = []
    with open('/proc/self/maps', 'rb') as maps, open('/proc/self/pagemap', 'rb', buffering=0) as pm:
        for line in maps:
            f = line.split(None, 5)
            if f[1] != b'rw-p':
                continue
            lo, hi = (int(x, 16) // size for x in f[0].split(b'-'))
            pm.seek(lo * 8)
            a = array.array('Q')
            a.frombytes(pm.read((hi - lo) * 8))
            want = PAGEMAP_PRESENT | PAGEMAP_EXCLUSIVE
            pages.extend(lo + i for i, e in enumerate(a) if e & want == want)
    return pages


def page_ranges(pages):
    """Sorted page numbers as (address, length) runs."""
    size = os.sysconf('SC_PAGE_SIZE')
    out = []
    start = prev = None
    for p in pages:
        if prev is not None and p == prev + 1:
            prev = p
            continue
        if start is not None:
            out.append((start * size, (prev - start + 1) * size))
        start = prev = p
    if start is not None:
        out.append((start * size, (prev - start + 1) * size))
    return out


def pin_charges_no_one():
    """Whether io_uring's pins here would count against no one's locked
    memory allowance: root with CAP_IPC_LOCK in the initial user
    namespace, on a kernel whose fork copies pinned pages (5.9+) and that
    has MADV_POPULATE_WRITE (5.14+, which the learned pages need anyway).
    Anyone else's pins are charged to the user's allowance, which the
    user's other programs share: a task would find less of it than
    stock's does."""
    if os.geteuid() != 0 or os.uname().machine not in IO_URING_ARCHES:
        return False
    try:
        if tuple(int(x) for x in os.uname().release.split('.')[:2]) < (5, 14):
            return False
        with open('/proc/self/status') as f:
            caps = [line.split()[1] for line in f if line.startswith('CapEff:')]
        with open('/proc/self/uid_map') as f:
            initial = f.read().split() == ['0', '0', '4294967295']
        return initial and bool(caps) and bool(int(caps[0], 16) >> CAP_IPC_LOCK & 1)
    except (OSError, ValueError):
        return False


def split_anonymous(ranges):
    """Sorted (address, length) ranges, cut at this process's mappings'
    bounds: (those in anonymous mappings, the rest)."""
    maps = []
    with open('/proc/self/maps', 'rb') as f:
        for line in f:
            fields = line.split(None, 5)
            lo, hi = (int(x, 16) for x in fields[0].split(b'-'))
            maps.append((lo, hi, fields[4] == b'0'))
    anon, rest = [], []
    i = 0
    for addr, n in ranges:
        end = addr + n
        while addr < end:
            while i < len(maps) and maps[i][1] <= addr:
                i += 1
            if i == len(maps) or maps[i][0] > addr:  # not mapped here
                cut, into = end if i == len(maps) else min(end, maps[i][0]), rest
            else:
                cut, into = min(end, maps[i][1]), anon if maps[i][2] else rest
            into.append((addr, cut - addr))
            addr = cut
    return anon, rest


class Prefaulter(object):
    """Copies, in a spare fork, the pages its tasks would copy on write:
    the seed's fork copies them where the seed could pin them (pin), the
    spare copies them ahead otherwise (prefault)."""

    def __init__(self):
        self.pages = set()
        self.ranges = []
        self.learners = 0  # tasks told to report their pages
        self.madvise = None
        self.pinned = None  # the io_uring fd holding a seed's pins
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            madvise = libc.madvise
        except (ImportError, OSError, AttributeError):
            return  # no ctypes or no madvise here: spares fault pages as tasks touch them
        madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        madvise.restype = ctypes.c_int
        self.get_errno = ctypes.get_errno
        self.madvise = madvise
        self.libc = libc
        self.ctypes = ctypes

    def take_learner(self):
        """Whether the next task to be given should report its pages: the
        first LEARN_TASKS. Counted as they are given, not as their reports
        come, so that no late report changes the set (and drops the seed)
        once the zygote is warm."""
        if self.madvise is None or self.learners >= LEARN_TASKS:
            return False
        self.learners += 1
        return True

    def learn(self, data):
        """Add a task's report of its pages; whether the set changed."""
        a = array.array('Q')
        a.frombytes(data[:len(data) // 8 * 8])
        if len(self.pages) + len(a) > MAX_LEARN_PAGES:
            return False
        n = len(self.pages)
        self.pages.update(a)
        if len(self.pages) == n:
            return False
        self.ranges = page_ranges(sorted(self.pages))
        return True

    def pin(self):
        """In a seed: pin the learned pages as io_uring buffers, so that
        each of its forks gets them copied at the fork, where that charges
        no one; or, where the kernel refuses pages of file-backed mappings
        (python's data; before 6.4), those in anonymous mappings, and
        prefault copies the rest. Whether it pinned; any other refusal (no
        io_uring, seccomp, a limit) leaves them all to prefault."""
        if self.madvise is None or not self.ranges or not pin_charges_no_one():
            return False
        ctypes, syscall = self.ctypes, self.libc.syscall
        syscall.restype = ctypes.c_long
        fd = syscall(IO_URING_SETUP, 1, (ctypes.c_char * IO_URING_PARAMS_SIZE)())
        if fd < 0:
            return False
        try:
            for every in (True, False):
                pin, rest = (self.ranges, []) if every else split_anonymous(self.ranges)
                iov = (ctypes.c_size_t * (2 * len(pin)))(*[x for r in pin for x in r])
                if pin and syscall(IO_URING_REGISTER, fd, IORING_REGISTER_BUFFERS, iov, len(pin)) == 0:
                    self.pinned = fd
                    self.ranges = rest
                    return True
        except (OSError, ValueError):
            pass  # no /proc/self/maps to split by
        os.close(fd)
        return False

    def prefault(self):
        for addr, n in self.ranges:
            if self.madvise(addr, n, MADV_POPULATE_WRITE) != 0:
                if self.get_errno() == errno.EINVAL:
                    return  # an older kernel: nothing to gain


# ---------------------------------------------------------------- task
# What a spare does with its task (run_task), in a fork of its zygote.

def stdio_on_terminal(slave, pty):
    """A terminal's slave as stdin, stdout and stderr, and as the
    controlling terminal of this session (its leader) unless pty says
    noctty (su -c runs its command in a session without one)."""
    if not pty.get('noctty'):
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    for fd in (0, 1, 2):
        os.dup2(slave, fd)
    if slave > 2:
        os.close(slave)


def stdio_on_pipes(out, err):
    """out and err as stdout and stderr."""
    os.dup2(out, 1)
    os.dup2(err, 2)
    for fd in (out, err):
        if fd > 2:
            os.close(fd)


def reset_task_process(msg):
    """The task's process state: the resolver, the environment with the
    request's Env on top, the locale it gives, the agent's cwd, and no
    atexit handlers but the task's own."""
    if msg.get('res_init'):
        res_init()
    env = msg.get('env') or {}
    apply_env(os.environ, env)
    if 'TZ' in env:
        # python reads TZ when time is imported: a fresh one would see this
        import time
        time.tzset()
    import locale
    try:
        locale.setlocale(locale.LC_CTYPE, '')
    except (locale.Error, ValueError):
        pass  # an unknown locale in Env: python itself starts with C then
    try:
        os.chdir(msg['cwd'])
    except OSError:
        pass  # the login directory is gone: the task runs where the zygote does
    try:
        atexit._clear()
    except AttributeError:
        pass  # not CPython: no handlers were registered through it


def task_std_streams(stdio_like):
    """sys.stdin, stdout and stderr on fds 0-2, as python makes them."""
    sys.stdin = sys.__stdin__ = _std_stream(0, False, stdio_like[0])
    sys.stdout = sys.__stdout__ = _std_stream(1, True, stdio_like[1])
    sys.stderr = sys.__stderr__ = _std_stream(2, True, stdio_like[2])


def main_namespace(script, zippath):
    """A fresh __main__ as python sets it up for script (a path), or for a
    script piped on stdin (script None), with sys.argv and sys.path[0] to
    match; zippath, the zygote's zip, leaves sys.path (the wrapper puts
    its own copy first). The namespace and the file name to compile with."""
    sys.path[:] = [p for p in sys.path if p != zippath]
    d = sys.modules['__main__'].__dict__
    d.clear()
    d.update({'__name__': '__main__', '__doc__': None, '__package__': None,
              '__spec__': None, '__annotations__': {}, '__builtins__': builtins,
              '__cached__': None})
    if script:
        from importlib.machinery import SourceFileLoader
        d['__file__'] = script
        d['__loader__'] = SourceFileLoader('__main__', script)
        sys.argv = [script]
        sys.path[0] = os.path.dirname(os.path.realpath(script))
        return d, script
    import _frozen_importlib
    d['__file__'] = '<stdin>'
    d['__loader__'] = _frozen_importlib.BuiltinImporter
    sys.argv = ['']
    sys.path[0] = ''
    return d, '<stdin>'


def compile_task(wc, tpl, fname, spans):
    """The task's code, or the exit status python gives a script that does
    not compile (it reports the error without a traceback)."""
    try:
        return wc.compile(tpl, fname, spans)
    except BaseException:
        et, ev, _tb = sys.exc_info()
    # Without the agent's frames: from python 3.11, excepthook prints the
    # exception's own traceback when given none.
    ev.__traceback__ = None
    return _print_exception(et, ev, None)


def _exec_main(code, d):
    """Run code as __main__; return the exit status python would give."""
    try:
        exec(code, d)
        return 0
    except SystemExit as e:
        return _exit_code(e)
    except BaseException:
        et, ev, tb = sys.exc_info()
    # Drop this function's frame: python's own traceback would not show
    # it. Out of the except block: python runs the hook with no exception
    # being handled (sys.exc_info() empty, no __context__ for its own).
    tb = tb.tb_next if tb is not None else None
    ev.__traceback__ = tb
    global _unhandled_sigint
    # Python 3.8+ ends by SIGINT after an uncaught KeyboardInterrupt
    # (unless the hook exits): a shell running it reports 130.
    _unhandled_sigint = issubclass(et, KeyboardInterrupt) and sys.version_info >= (3, 8)
    return _print_exception(et, ev, tb)


# Set in a task whose __main__ ended in an uncaught KeyboardInterrupt.
_unhandled_sigint = False


def _print_exception(et, ev, tb):
    """What python does with an uncaught exception (PyErr_Print): it calls
    sys.excepthook, which may end the process with a SystemExit of its own
    (ansible-core 2.14's file module calls fail_json there); if the hook
    fails otherwise, both exceptions are printed. The exit status."""
    sys.last_type, sys.last_value, sys.last_traceback = et, ev, tb
    if sys.version_info >= (3, 12):
        sys.last_exc = ev
    if not hasattr(sys, 'excepthook'):
        _stderr_write('sys.excepthook is missing\n')
        sys.__excepthook__(et, ev, tb)
        return 1
    global _unhandled_sigint
    try:
        sys.excepthook(et, ev, tb)
        return 1
    except SystemExit as e:
        _unhandled_sigint = False  # python exits with the hook's status
        return _exit_code(e)
    except BaseException:
        et2, ev2, tb2 = sys.exc_info()
    # Without this function's frame, as python shows the hook's.
    tb2 = tb2.tb_next if tb2 is not None else None
    ev2.__traceback__ = tb2
    _stderr_write('Error in sys.excepthook:\n')
    sys.__excepthook__(et2, ev2, tb2)
    _stderr_write('\nOriginal exception was:\n')
    sys.__excepthook__(et, ev, tb)
    return 1


def _stderr_write(text):
    try:
        sys.stderr.write(text)
    except (AttributeError, OSError, ValueError):
        pass  # the task set sys.stderr to None, or closed or broke it


def _exit_code(e):
    """The exit status Python gives an uncaught SystemExit(e.code)."""
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xff
    try:
        sys.stderr.write(str(code) + '\n')
    except (AttributeError, OSError, ValueError):
        pass  # the task set sys.stderr to None, or closed or broke it: the status still goes
    return 1


def finish_interpreter(rc):
    """What python does after __main__: join non-daemon threads, run the
    atexit handlers, flush the std streams (120 if that fails after a
    clean exit). The exit status."""
    if 'threading' in sys.modules:
        try:
            sys.modules['threading']._shutdown()
        except BaseException:
            # As python reports it, and goes on with its exit.
            _print_ignored(sys.modules['threading'])
    try:
        atexit._run_exitfuncs()
    except BaseException:
        pass  # atexit printed each failing handler itself (and before 3.11 raises the last again)
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except BaseException:
            if rc == 0:
                rc = 120
    return rc


def _std_stream(fd, write, like):
    raw = io.open(fd, 'wb' if write else 'rb', buffering=-1, closefd=False)
    enc = getattr(like, 'encoding', None) or 'utf-8'
    errs = getattr(like, 'errors', None) or 'strict'
    lb = bool(getattr(like, 'line_buffering', False))
    if write and not lb:
        # As python does for a terminal.
        try:
            lb = os.isatty(fd)
        except OSError:
            pass  # not open: as for a pipe
    return io.TextIOWrapper(raw, encoding=enc, errors=errs, line_buffering=lb)


def report_status(msg, rc):
    """Tell the agent the exit status now, and end the task's output,
    rather than after the exit and a round through the zygote: tearing
    down the address space takes a while."""
    sfd = msg.get('status_fd')
    if sfd is None:
        return
    try:
        os.write(sfd, str(rc & 0xff).encode('ascii'))
        os.close(sfd)
        os.close(1)
        os.close(2)
        if msg.get('pty') is not None:
            os.close(0)  # the terminal too: its output ends here
    except OSError:
        pass  # the agent is gone: the zygote's waitpid reports the exit


def report_pages(msg):
    """For the zygote's prefault: the pages this task came to own."""
    lsock = msg.get('learn_sock')
    if lsock is None:
        return
    try:
        lsock.send(array.array('Q', own_pages()).tobytes())
    except Exception:
        # No /proc/self/pagemap here, or the zygote is gone: nothing
        # learned from this task, whose status must still be reported.
        pass


def run_task(msg, tpl, wc, stdio_like, zippath):
    """In a spare fork of a zygote: run the wrapper template tpl (its zip
    literal compiled in by wc) as python would run the script. Never
    returns."""
    rc = 1
    try:
        reset_task_process(msg)
        task_std_streams(stdio_like)
        d, fname = main_namespace(msg.get('script'), zippath)
        code = compile_task(wc, tpl, fname, task_spans(msg))
        del tpl
        rc = code if isinstance(code, int) else _exec_main(code, d)
        rc = finish_interpreter(rc)
        if _unhandled_sigint:
            rc = 128 + signal.SIGINT
        # Pages first: a learner's report is in before its answer, so the
        # zygote has it before the tasks that answer lets through.
        report_pages(msg)
        report_status(msg, rc)
        if _unhandled_sigint:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        _write_traceback()
    finally:
        os._exit(rc)


def _write_traceback():
    """The exception being handled, on fd 2, in a process about to exit."""
    import traceback
    try:
        os.write(2, traceback.format_exc().encode('utf-8', 'replace'))
    except OSError:
        pass  # fd 2 is closed: nowhere to say it


def _print_ignored(obj):
    """An exception python ignores after printing it (unraisable)."""
    import traceback
    try:
        sys.stderr.write('Exception ignored in: %r\n' % (obj,))
        traceback.print_exc()
    except (OSError, ValueError):
        pass  # stderr is closed or broken: nowhere to say it


# ---------------------------------------------------------------- zygote

def reaped(options):
    """(pid, waitpid status) of each child reaped: those that exited, with
    WNOHANG; all of them, with options 0."""
    while True:
        try:
            pid, st = os.waitpid(-1, options)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid, st


def reap_within(pids, timeout):
    """Reap the children pids (None: every child) as they exit, for at
    most timeout seconds; those still running then are left to init."""
    end = time.monotonic() + timeout
    left = None if pids is None else set(pids)
    while left is None or left:
        want = -1 if left is None else min(left)
        try:
            pid, _ = os.waitpid(want, os.WNOHANG)
        except ChildProcessError:
            if left is None:
                return  # no child left
            left.discard(want)  # reaped already
            continue
        if pid:
            if left is not None:
                left.discard(pid)
        elif time.monotonic() >= end:
            return
        else:
            time.sleep(0.001)


def seed_reap(report, options):
    """In a seed: reap its forks (reaped's options) and report each exit
    to the zygote."""
    for pid, st in reaped(options):
        try:
            os.write(report, EXIT_RECORD.pack(pid, st))
        except OSError:
            pass  # the zygote is gone


class ZygoteServer(object):
    """A zygote: the process, forked from the agent, that has imported one
    AnsiballZ zip and forks its tasks.

    It keeps one child forked ahead (a spare, waiting in spare_main) so
    that no fork is on a request's path, and hands it to the agent, which
    sends the next task straight to it; the next spare is forked once that
    task has exited (spare_later).

    Once warm it forks its spares through a seed (seed_main): a fork of
    the zygote that forks a spare each time the zygote asks, reaps them
    and reports their exits. A fork write-protects every page of the
    process that forks, and a zygote forking its spares then faulted on
    each page its loop wrote after the fork (~270 a task, each a trap,
    dear in a VM); the seed's loop is small, and the zygote's own pages
    stay writable. A template shape the zygote learns it sends the seed
    to learn too; what else it learns (the pages to copy ahead, the
    resolver) drops the seed, which exits once its forks have; the next
    one is forked knowing it.

    Messages on sock (encode_msg; fds go with a message's first byte):

      zygote -> agent  {'ready': import_snapshot}: warm, first of all;
                       {'spare': pid, 'learn': bool} + the spare's control
                       socket; {'id', 'pid'}: task id was forked here;
                       {'id', 'status'}: task id exited (waitpid status)
      agent -> zygote  {'used': pid, 'id'}: the agent sent task id to
                       spare pid (with the template's spans and shape
                       until the zygote has learned that shape); a task
                       ({'id', ...} + template + its fds) when the agent
                       held no spare. Either may carry 'res_init'.
    """

    def __init__(self, sock, zippath, fqn, b64, stdio_like, code_fd):
        self.sock = sock
        self.zippath = zippath
        self.code_fd = code_fd  # the agent's CodeCache, until warm
        self.fqn = fqn
        self.b64 = b64
        self.stdio_like = stdio_like
        self.wc = None  # WrapperCompiler, once warm
        self.pf = None  # Prefaulter, once warm
        self.learn_r = self.learn_w = None  # tasks' page reports (datagrams)
        self.wake_r = self.wake_w = None  # SIGCHLD wakes the loop
        self.sel = None
        self.tasks = {}  # pid -> request id, for tasks whose exit is reported
        self.held = None  # (pid, control socket) of a spare not handed over yet
        self.handed = None  # pid of the spare the agent holds, unused so far
        self.early = {}  # pid -> exit status of handed spares not yet reported used
        self.due = None  # when to fork the next spare even if a task still runs
        self.seed = None  # (pid, control socket, exit report pipe) of the seed, if any
        self.seed_reports = {}  # a seed's exit report pipe -> the bytes of a part record
        self.seeded = {}  # pid of a seed's fork -> its seed's report pipe
        self.leaving = False  # the agent is gone: nothing more is told or forked

    def run(self):
        """Never returns."""
        try:
            self.warm_up()
            self.start_loop()
            self.serve()
        except BaseException:
            _write_traceback()
        finally:
            os._exit(1)

    # ---- start

    def warm_up(self):
        """Import what the zip's tasks will import, cache the module's
        compiled code, and freeze the garbage collector's view of the heap
        so that tasks do not copy it on write."""
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        # The agent's own imports: it checks those itself (Agent.deps).
        agent_modules = set(sys.modules)
        sys.path.insert(0, self.zippath)
        restore = compile_zip_modules_once(self.code_fd)
        # What every AnsiballZ wrapper imports, then what the module
        # imports. Never the module itself: its top-level code must run
        # once per task, in the task.
        import_quietly(WRAPPER_IMPORTS + ZIP_IMPORTS_219 + zip_profiles(self.zippath) +
                       ('ansible.module_utils.basic',) + imports_of(self.fqn))
        if self.fqn:
            cache_module_code(self.fqn)
        restore()
        # Tasks do not inherit it.
        os.close(self.code_fd)
        self.code_fd = None
        note_run_command_preexec()
        # Taken after the imports: the agent checks it before each task
        # it sends here, and replaces this zygote once it is stale.
        self.tell_agent({'ready': import_snapshot(self.zippath, agent_modules)})
        self.wc = WrapperCompiler(self.b64, self.zippath)
        self.pf = Prefaulter()
        self.learn_r, self.learn_w = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.learn_r.setblocking(False)
        import gc
        gc.collect()
        if hasattr(gc, 'freeze'):
            gc.freeze()

    def start_loop(self):
        self.wake_r, self.wake_w = os.pipe()
        _set_nonblock(self.wake_r)
        _set_nonblock(self.wake_w)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *a: None)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.sock, selectors.EVENT_READ)
        self.sel.register(self.wake_r, selectors.EVENT_READ)
        self.sel.register(self.learn_r, selectors.EVENT_READ)
        self.held = self.fork_spare()

    # ---- loop

    def serve(self):
        """Offer the spare once nothing else is to be done; never returns
        (exits when the agent's socket ends)."""
        while True:
            offer = self.held is not None and self.handed is None
            timeout = None
            if offer:
                timeout = 0
            elif self.due is not None:
                timeout = max(0, self.due - time.monotonic())
            events = self.sel.select(timeout)
            if not events and offer:
                self.offer_spare()
                continue
            if not events and self.due is not None:
                self.spare_now()
                continue
            for key, _ in events:
                if key.fileobj is self.learn_r:
                    self.read_learned()
                elif key.fileobj is self.sock:
                    self.read_agent()
                elif key.fileobj in self.seed_reports:
                    self.read_seed_reports(key.fileobj)
                else:
                    self.reap()

    def tell_agent(self, obj, fds=None):
        if self.leaving:
            return
        try:
            send_msg(self.sock, obj, fds=fds)
        except (BrokenPipeError, ConnectionResetError):
            self.agent_gone()

    def agent_gone(self):
        """The agent is gone, or retired this zygote: exit once the seed
        and the spares have, reaping them, unless a task runs on (as
        stock's module does when its ssh dies; its seed waits for it).
        A task the agent saw end may not have exited yet: its exit is
        waited for first. Never returns."""
        self.leaving = True
        if self.held is not None:
            self.held[1].close()
            self.held = None
        self.drop_seed()
        if self.sel is not None:
            self.sel.unregister(self.sock)
            self.sel.unregister(self.learn_r)
            end = time.monotonic() + TASK_EXIT_WAIT
            while self.tasks and time.monotonic() < end:
                for key, _ in self.sel.select(max(0, end - time.monotonic())):
                    if key.fileobj in self.seed_reports:
                        self.read_seed_reports(key.fileobj)
                    else:
                        self.reap()
        if not self.tasks:
            reap_within(None, ZYGOTE_TEARDOWN)
        os._exit(0)

    def offer_spare(self):
        """Hand the spare held to the agent: its pid and control socket."""
        pid, ctl = self.held
        self.tell_agent({'spare': pid, 'learn': self.pf.take_learner()}, fds=[ctl.fileno()])
        ctl.close()
        self.handed, self.held = pid, None

    def read_learned(self):
        try:
            data = self.learn_r.recv(1 << 20)
        except BlockingIOError:
            return  # woken without a datagram
        if self.pf.learn(data):
            self.drop_seed()  # the next seed's spares copy the new set ahead

    def read_agent(self):
        try:
            msg, tpl, fds = recv_msg(self.sock)
        except (EOFError, OSError):
            self.agent_gone()
        if msg.get('res_init'):
            res_init()  # for the forks to come
            self.drop_seed()
        if 'used' in msg:
            self.spare_used(msg, tpl)
        else:
            self.start_task(msg, tpl, fds)

    def spare_used(self, msg, tpl):
        """The agent sent task msg['id'] to the spare msg['used'] (tpl: its
        template, parameters blanked)."""
        if self.handed == msg['used']:
            self.handed = None
        self.task_started(msg['used'], msg['id'])
        # The next tasks' forks inherit the compiled shape (sent until learned).
        if tpl:
            self.learn_shape(bytes(tpl), task_spans(msg))
        self.spare_later()

    def learn_shape(self, tpl, spans):
        """Compile a template's shape for the spares to come: here, for
        the seeds to come, and in the seed."""
        if not self.wc.learn(tpl, spans) or self.seed is None:
            return
        try:
            self.seed[1].sendall(b'L')
            send_msg(self.seed[1], spans, tpl)
        except OSError:
            self.drop_seed()  # gone, or stopped: the next is forked knowing it

    def start_task(self, msg, tpl, fds):
        """A task the agent sent here (it held no spare): to the spare held,
        or to one forked on the spot."""
        if self.pf.take_learner():
            msg['learn'] = True
        pid = self.send_to_spare(msg, tpl, fds)
        # The task's arguments and environment stay in the spare that runs
        # it only.
        forget_request(msg)
        blank_params(tpl, msg.get('params'))
        shape = bytes(tpl)
        zero(tpl)
        # Before the next fork, which must not hold the pipes.
        for fd in fds:
            os.close(fd)
        if pid is not None:
            self.learn_shape(shape, task_spans(msg))
            self.task_started(pid, msg['id'])
            self.tell_agent({'id': msg['id'], 'pid': pid})
        self.spare_later()

    def send_to_spare(self, msg, tpl, fds):
        """Send a task to the spare held (or a new one), and to another new
        one if that one died. The pid of the spare that took it, or None."""
        for _attempt in (0, 1):
            pid, ctl = self.held if self.held is not None else self.fork_spare()
            self.held = None
            try:
                send_msg(ctl, msg, tpl, fds)
            except OSError:
                pid = None  # the spare died: make another
            ctl.close()
            if pid is not None:
                return pid
        return None

    def spare_later(self):
        """Fork the next spare once the tasks running have exited: its copy
        ahead then takes no CPU from them (or after SPARE_WAIT if one runs
        on)."""
        if self.held is None and self.due is None:
            self.due = time.monotonic() + SPARE_WAIT
            if not self.tasks:
                self.spare_now()

    def spare_now(self):
        self.due = None
        if self.held is None:
            self.held = self.fork_spare()

    def task_started(self, pid, rid):
        """pid runs task rid: report its exit from now on."""
        st = self.early.pop(pid, None)
        if st is not None:
            self.tell_agent({'id': rid, 'status': st})
        else:
            self.tasks[pid] = rid

    def reap(self):
        """SIGCHLD: report the tasks that exited."""
        drain(self.wake_r)
        for pid, st in reaped(os.WNOHANG):
            self.exited(pid, st)

    def read_seed_reports(self, fd):
        """A seed's exit reports: (pid, waitpid status) records. At their
        end (the seed gone), its forks still unreported count as killed:
        their statuses went to init."""
        try:
            data = os.read(fd, 4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b''
        if not data:
            self.sel.unregister(fd)
            os.close(fd)
            del self.seed_reports[fd]
            for pid in [p for p, f in self.seeded.items() if f == fd]:
                self.exited(pid, int(signal.SIGKILL))
            return
        buf = self.seed_reports[fd] + data
        n = len(buf) // EXIT_RECORD.size * EXIT_RECORD.size
        self.seed_reports[fd] = buf[n:]
        for pid, st in EXIT_RECORD.iter_unpack(buf[:n]):
            self.exited(pid, st)

    def exited(self, pid, st):
        """A fork of this zygote or of its seed exited."""
        self.seeded.pop(pid, None)
        rid = self.tasks.pop(pid, None)
        if self.leaving:
            return
        if rid is not None:
            self.tell_agent({'id': rid, 'status': st})
            if self.due is not None and not self.tasks:
                self.spare_now()
        elif pid == self.handed:
            # Its task, if the agent sent it one, is reported when the
            # agent says so; the agent gets another spare either way.
            self.early[pid] = st
            self.handed = None
            if self.held is None:
                self.held = self.fork_spare()

    # ---- spares

    def fork_spare(self):
        """A new spare: (pid, control socket). The seed's, or (the seed
        gone) a fork of this process."""
        if self.seed is None:
            self.seed = self.fork_seed()
        spare = self.ask_seed()
        if spare is not None:
            return spare
        return self.fork_child(self.spare_main, prefault=True)

    def fork_child(self, main, prefault=False, keep=()):
        """A fork running main(control socket): (pid, control socket)."""
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        if prefault:
            PREFAULT_AT_FORK.append(self.pf.prefault)
        pid = os.fork()
        if pid == 0:
            a.close()
            main(b, *keep)
        del PREFAULT_AT_FORK[:]
        b.close()
        return pid, a

    def fork_seed(self):
        """A seed, and its exit report pipe watched."""
        r, w = os.pipe()
        pid, ctl = self.fork_child(self.seed_main, keep=(w,))
        os.close(w)
        ctl.settimeout(SEED_WAIT)
        _set_nonblock(r)
        self.seed_reports[r] = b''
        self.sel.register(r, selectors.EVENT_READ)
        return pid, ctl, r

    def ask_seed(self):
        """A spare the seed forks, or None if it cannot (gone)."""
        ctl = self.seed[1]
        data, fds = b'', []
        try:
            ctl.sendall(b'.')
            data, anc, _flags, _addr = ctl.recvmsg(PID_RECORD.size, socket.CMSG_SPACE(FD_SIZE))
            fds = fds_of(anc)
            if 0 < len(data) < PID_RECORD.size:
                data += bytes(recv_exact(ctl, PID_RECORD.size - len(data)))
        except (EOFError, OSError):
            pass  # the seed is gone
        if len(data) != PID_RECORD.size or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            self.drop_seed()
            return None
        pid = PID_RECORD.unpack(data)[0]
        self.seeded[pid] = self.seed[2]
        return pid, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fds[0])

    def drop_seed(self):
        """What the zygote knows changed: the seed would not know it. It
        exits once its forks have."""
        if self.seed is not None:
            self.seed[1].close()
            self.seed = None

    def seed_main(self, ctl, report):
        """In a seed: fork a spare each time the zygote asks on ctl (a
        byte, '.'; the answer, the spare's pid and its control socket), or
        learn a template's shape ('L' and a message: spans, template), and
        write each fork's exit to report (EXIT_RECORD); once ctl ends,
        exit when the last fork has. As little python per fork as can be:
        each page written after a fork costs a fault. Never returns."""
        try:
            self.detach(ctl.fileno(), report)
            self.pf.pin()  # its fd closes in each spare's detach, the pins stay the seed's
            signal.signal(signal.SIGCHLD, lambda *a: seed_reap(report, os.WNOHANG))
            while True:
                op = os.read(ctl.fileno(), 1)
                if not op:
                    break
                if op == b'L':
                    spans, tpl, _ = recv_msg(ctl)
                    self.wc.learn(bytes(tpl), spans)
                    continue
                a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                PREFAULT_AT_FORK.append(self.pf.prefault)
                try:
                    pid = os.fork()
                except OSError:
                    pid = None  # no fork to answer with: the zygote drops this seed
                if pid == 0:
                    a.close()
                    ctl.close()
                    self.spare_main(b)
                del PREFAULT_AT_FORK[:]
                b.close()
                if pid is None:
                    a.close()
                    ctl.sendall(PID_RECORD.pack(0))
                    continue
                try:
                    ctl.sendmsg([PID_RECORD.pack(pid)], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, FD_RECORD.pack(a.fileno()))])
                except OSError:
                    pass  # the zygote stopped waiting: the spare ends with a
                a.close()
            # Waiting on: nothing of the agent's held open meanwhile.
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            seed_reap(report, 0)
        except BaseException:
            pass  # the zygote is gone: its forks' statuses go to init
        os._exit(0)

    def spare_main(self, ctl):
        """In a spare: wait for the task on ctl, then run it. Never returns."""
        try:
            # Copy ahead first (done already where python ran it as the
            # fork's first hook): the pages detaching writes are among
            # those learned, and madvise copies a page for less than a
            # write fault does.
            prefault_after_fork()
            self.detach(ctl.fileno())
            self.detach_spare()
            signal.signal(signal.SIGHUP, SIGHUP_AT_START)  # the task's, as python found it
            msg, tpl = self.receive_task(ctl)
        except BaseException:
            os._exit(127)
        run_task(msg, tpl, self.wc, self.stdio_like, self.zippath)

    def detach(self, *keep):
        """In a fork: nothing of the zygote's loop or the seed's, and no fd
        but stdio, keep and the page report socket (a task's pipes held
        here would never reach EOF)."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        if self.sock is not None:  # the zygote's: the seed's forks have none
            self.sel.close()
            os.close(self.wake_r)
            os.close(self.wake_w)
            self.sock.close()
            self.sock = None
            self.learn_r.close()
        close_fds_except(self.learn_w.fileno(), *keep)

    def detach_spare(self):
        """In a spare: a session of its own, and as stdin an empty pipe at
        its end: what a pipelined module's children find on stdin with
        stock (ssh's channel, which python read to its end)."""
        os.setsid()
        r, w = os.pipe()
        os.close(w)
        os.dup2(r, 0)
        os.close(r)

    def receive_task(self, ctl):
        """In a spare: wait for the task's message and template, and make the
        fds that come with it the task's stdio (and status pipe)."""
        try:
            msg, tpl, fds = recv_msg(ctl)
        except (EOFError, OSError):
            os._exit(0)  # never used: the agent or the zygote dropped it
        ctl.close()
        tpl = bytes(tpl)
        if msg.get('learn'):
            msg['learn_sock'] = self.learn_w
        else:
            self.learn_w.close()
        pty = msg.get('pty')
        if pty is not None:
            stdio_on_terminal(fds.pop(0), pty)
            msg['env'] = session_env(pty, os.ttyname(0), msg.get('env'))
        else:
            stdio_on_pipes(fds.pop(0), fds.pop(0))
            msg['env'] = session_env(None, None, msg.get('env'))
        if fds:
            os.set_inheritable(fds[0], False)
            msg['status_fd'] = fds[0]
        return msg, tpl


# ---------------------------------------------------------------- agent

class Proc(object):
    """A request with a child process whose output streams to the client."""

    def __init__(self, rid, kind):
        self.id = rid
        self.kind = kind
        self.pid = None
        self.popen = None
        self.zygote = None
        self.out_fd = None
        self.err_fd = None
        self.in_fd = None
        self.inbuf = ByteQueue(CHUNK)
        self.in_eof = False
        self.stat_fd = None
        self.statbuf = b''
        self.wait_status = None  # the zygote's waitpid status, before the status pipe's end
        self.check_us = 0  # a module's: spent checking its imports were unchanged
        self.policy = False  # a module's: say whether it changed the become tools' policy
        self.shell = None  # a module's: the shell stock runs its python under
        self.pty = False  # on a terminal, whose master is out_fd
        self.status = None
        self.error = None
        self.cancelled = False
        self.done = False


class Zygote(object):
    """The agent's handle on a zygote (a ZygoteServer in process pid): its
    socket, the tasks it runs, what is queued for it, the spare it offered."""

    def __init__(self, pid, sock, entry):
        self.pid = pid
        self.sock = sock
        self.entry = entry
        self.born = time.time()
        self.resolv = _mtime(RESOLV)
        self.reader = MsgReader()
        self.procs = {}
        self.closing = False
        self.dead = False
        self.outq = []  # [data (bytearray, zeroed once sent), fds or None once sent, proc, attempts, bytes sent]
        self.events = selectors.EVENT_READ
        self.last_used = self.born
        self.spare = None  # (pid, control socket, learn): a fork awaiting a task
        self.shapes = set()  # shape_digest of the templates it learned
        self.deps = None  # its import_snapshot, once warm; tasks wait for it
        self.fdq = []  # fds received, for the spare offers not yet read

    def drop_spare(self):
        """Close the control socket of the spare held: it exits."""
        if self.spare is not None:
            self.spare[1].close()
            self.spare = None


class ZipEntry(object):
    """A module zip the agent holds (by its SHA-256), its base template and
    its zygote. A zip whose files are those of one held already (Ansible
    builds each module's zip afresh every playbook run, so zips of one
    module differ between runs in their time stamps only) is that one's
    twin: its tasks run in that zip's zygote, from that zip's file."""

    def __init__(self, digest, path, b64, home=None):
        self.digest = digest
        self.path = path
        self.b64 = b64
        self.home = home or self  # the entry whose zygote runs this zip's tasks
        self.zdata = None  # the zip, written while its tasks run (payload_up)
        self.name = None  # the module's name in its payload dir's
        self.pdir = None  # its payload dir
        self.up = False  # whether pdir and the zip in it are on disk
        self.base = None  # the first template: later ones come as a delta against it
        self.fqn = None
        self.zygote = None


def zip_files_key(zdata):
    """What a zip holds, its time stamps aside: each entry's name (its
    bytes in the zip), CRC-32 and size, hashed as Go's zipFilesKey hashes
    them; None if zdata does not read as a zip."""
    import zipfile
    try:
        with zipfile.ZipFile(io.BytesIO(zdata)) as z:
            files = b''.join(b'%s\0%d\0%d\n' % (i.filename.encode('utf-8' if i.flag_bits & 0x800 else 'cp437'),
                                                i.CRC, i.file_size) for i in z.infolist())
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, UnicodeError):
        return None
    return hashlib.sha256(files).hexdigest()


class Agent(object):
    """The agent's process: one selectors loop over the client's channel,
    the pipes of the processes it runs, and its zygotes' sockets.

    Sections below: the channel (frames out and in), fd bookkeeping, the
    loop, requests (one op_* method per op, in OPS), commands (exec),
    processes (their streams and exits), modules (op_module and the
    zygotes that run them)."""

    # op -> method: the requests a client may send (interp's Client).
    OPS = {
        'ping': 'op_ping',
        'stat': 'op_stat',
        'mkdir': 'op_mkdir',
        'chmod': 'op_chmod',
        'rmtree': 'op_rmtree',
        'put': 'op_put',
        'get': 'op_get',
        'exec': 'op_exec',
        'module': 'op_module',
        'policy': 'op_policy',
        'exit': 'op_exit',
    }

    def __init__(self):
        learn_session_env()
        self.rfd = os.dup(0)
        self.wfd = os.dup(1)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.close(null)
        self.stdio_like = (sys.stdin, sys.stdout, sys.stderr)
        _set_nonblock(self.rfd)
        _set_nonblock(self.wfd)
        try:
            self.cwd = os.getcwd()
        except OSError:
            self.cwd = os.path.expanduser('~')
        # The temp root, where each zip's payload dir is while its tasks
        # run (payload_up), and the zygotes' compiled code (CodeCache).
        self.tmp, self.code_fd = find_tmp_root()
        self.env_files = login_env_files()
        self.env_mtimes = [_mtime(p) for p in self.env_files]
        # Modules site imported (a .pth may import from site-packages):
        # every zygote inherits them, so a change restarts the agent. Their
        # directories are not watched: each zygote watches sys.path's.
        self.deps = import_snapshot(dirs=False)
        # What the login user's next python would be (a become tool's
        # steps are left to the tool: its interpreters retire with the
        # login one's restart).
        self.interp_deps = interpreter_snapshot(sys.argv[1:])
        # As the become tool that started this interpreter saw them.
        self.policy, self.policy_blind = policy_snapshot()
        self.passwd = stat_key(PASSWD)
        self.sel = selectors.DefaultSelector()
        self.frames = FrameReader()
        self.outbuf = ByteQueue(1 << 18)
        # What reads from the channel and the processes' pipes land in.
        self.rscratch = bytearray(1 << 18)
        self.pscratch = bytearray(CHUNK)
        self.handling = None  # the payload of the frame being handled
        self.handling_req = None  # and the request decoded from it
        self.writing = False
        self.procs = {}
        self.zips = {}
        self.zip_homes = {}  # zip_files_key -> the entry whose zygote runs those files
        self.zygotes = {}
        self.spawning_changed = False
        self.fdmap = {}
        self.paused = False
        self.ops = {op: getattr(self, name) for op, name in self.OPS.items()}
        self.wake_r, self.wake_w = os.pipe()
        _set_nonblock(self.wake_r)
        _set_nonblock(self.wake_w)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *a: None)
        if SIGHUP_AT_START == signal.SIG_DFL:
            # A become interpreter on a terminal is hung up when its
            # connection closes, and sudo relays the SIGHUP: it leaves
            # as at the channel's end, its zygotes reaped first.
            signal.signal(signal.SIGHUP, lambda sig, frame: self.shutdown(sig))
        self.sel.register(self.rfd, selectors.EVENT_READ, ('proto', None))
        self.sel.register(self.wake_r, selectors.EVENT_READ, ('wake', None))

    # ---- the channel: frames out

    def send(self, typ, rid, *parts):
        """Queue a frame whose payload is parts, and write what the
        channel takes."""
        self.outbuf.append(HDR.pack(5 + sum(len(x) for x in parts), typ, rid))
        for x in parts:
            self.outbuf.append(x)
        self.flush()

    def reply(self, rid, obj, blob=b''):
        js = json.dumps(obj).encode('utf-8')
        self.send(T_RESP, rid, U32.pack(len(js)), js, blob)

    def flush(self):
        while self.outbuf:
            try:
                n = os.write(self.wfd, self.outbuf.view())
            except (BlockingIOError, InterruptedError):
                break
            self.outbuf.consume(n)
        want = bool(self.outbuf)
        if want != self.writing:
            self.writing = want
            if want:
                self.sel.register(self.wfd, selectors.EVENT_WRITE, ('out', None))
            else:
                self.sel.unregister(self.wfd)
        self.update_pause()

    def update_pause(self):
        pause = len(self.outbuf) > OUT_HIGH
        if pause == self.paused:
            return
        self.paused = pause
        for fd, (kind, p) in list(self.fdmap.items()):
            if kind in ('pout', 'perr'):
                if pause:
                    self.sel.unregister(fd)
                else:
                    self.sel.register(fd, selectors.EVENT_READ, (kind, p))

    # ---- the channel: frames in

    def read_proto(self):
        """Read and handle the client's frames; False once the channel has
        ended or is no longer framed."""
        try:
            n = os.readv(self.rfd, [self.rscratch])
        except (BlockingIOError, InterruptedError):
            return True
        if not n:
            return False
        data = memoryview(self.rscratch)[:n]
        try:
            for typ, rid, payload in self.frames.feed(data):
                self.handling = payload
                try:
                    self.frame(typ, rid, payload)
                finally:
                    zero(payload)
                    self.handling = None
        except ProtocolError as e:
            warn(str(e))
            return False
        finally:
            zero(data)
        return True

    def frame(self, typ, rid, payload):
        if typ == T_REQ:
            req, blob = decode_request(payload)
            self.handling_req = req
            try:
                self.request(rid, req, blob)
            except Exception as e:
                if req.get('noreply'):
                    warn('%s %s: %s' % (req.get('op'), req.get('path'), e))
                else:
                    self.reply(rid, _errinfo(e))
            finally:
                self.handling_req = None
                forget_request(req)
        elif typ in (T_STDIN, T_STDIN_EOF):
            p = self.procs.get(rid)
            if p is None or p.in_fd is None:
                return
            if typ == T_STDIN:
                p.inbuf.append(payload)
            else:
                p.in_eof = True
            self.write_stdin(p)
        elif typ == T_CANCEL:
            p = self.procs.get(rid)
            if p is not None:
                p.cancelled = True
                self.kill(p)

    # ---- fd bookkeeping

    def watch(self, fd, kind, p, events=selectors.EVENT_READ):
        _set_nonblock(fd)
        self.fdmap[fd] = (kind, p)
        if kind in ('pout', 'perr') and self.paused:
            return
        self.sel.register(fd, events, (kind, p))

    def unwatch(self, fd):
        if fd in self.fdmap:
            del self.fdmap[fd]
            try:
                self.sel.unregister(fd)
            except KeyError:
                pass  # not registered: an output pipe while paused, a stdin with nothing queued
        try:
            os.close(fd)
        except OSError:
            pass  # close(2) fails only for an fd closed already: forgetting it is what counts

    # ---- main loop

    def hello(self):
        import pwd
        try:
            user = pwd.getpwuid(os.getuid()).pw_name
        except KeyError:
            user = ''
        # What the login shell gave it, which its commands (a dd) create
        # files under.
        mask = os.umask(0o022)
        os.umask(mask)
        info = {
            'protocol': PROTOCOL,
            'python': '%d.%d.%d' % sys.version_info[:3],
            'executable': sys.executable,
            'pid': os.getpid(),
            'uid': os.getuid(),
            'gid': os.getgid(),
            'user': user,
            'home': os.path.expanduser('~'),
            'cwd': self.cwd,
            'tmpdir': self.tmp,
            'umask': mask,
        }
        self.outbuf.append(MAGIC)
        self.reply(0, info)

    def run(self):
        # The hello goes out on the (blocking) channel before anything else.
        self.hello()
        while True:
            for key, mask in self.sel.select():
                if self.sel.get_map().get(key.fd) is not key:
                    continue  # unwatched by an event earlier in this batch
                kind, p = key.data
                try:
                    if kind == 'proto':
                        if not self.read_proto():
                            return
                    elif kind == 'out':
                        self.flush()
                    elif kind == 'wake':
                        self.reap()
                    elif kind in ('pout', 'perr'):
                        self.read_pipe(key.fd, kind, p)
                    elif kind == 'pstat':
                        self.read_status(p)
                    elif kind == 'pin':
                        self.write_stdin(p)
                    elif kind == 'zyg':
                        if mask & selectors.EVENT_WRITE:
                            self.zflush(p)
                        if mask & selectors.EVENT_READ:
                            self.read_zygote(p)
                except Exception as e:
                    # Never let one request take the agent down.
                    warn('%s: %r' % (kind, e))

    def shutdown(self, sig=None):
        """Exit, once the zygotes have (they exit when their sockets end,
        and at once when a task of theirs runs on): their exits go to the
        agent, not to init; then die of sig, if given (the signal that
        called this). Never returns."""
        if SIGHUP_AT_START == signal.SIG_DFL:
            signal.signal(signal.SIGHUP, signal.SIG_IGN)  # leaving already
        # A dropped connection hangs up its terminals at once, as sshd
        # does: their processes get SIGHUP now, not once the zygotes
        # (which wait a moment for their running tasks) are gone.
        for p in self.procs.values():
            if p.pty and p.out_fd is not None:
                os.close(p.out_fd)
                p.out_fd = None
        for z in list(self.zygotes.values()):
            z.drop_spare()
            if z.sock is not None:
                try:
                    z.sock.close()
                except OSError:
                    pass  # the agent exits anyway; the zygote sees its socket end
        for e in self.zips.values():
            if e.up:
                e.up = False
                shutil.rmtree(e.pdir, ignore_errors=True)
        reap_within([z.pid for z in self.zygotes.values()], AGENT_TEARDOWN)
        if sig is not None:
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        os._exit(0)

    # ---- requests: each op_* answers req (its JSON) and blob (the bytes
    # after it) for request rid; an exception it raises is the answer.

    def request(self, rid, req, blob):
        handler = self.ops.get(req.get('op'))
        if handler is None:
            self.reply(rid, {'error': 'unknown op %r' % (req.get('op'),)})
            return
        handler(rid, req, blob)

    def op_ping(self, rid, req, blob):
        self.reply(rid, {})

    def op_exit(self, rid, req, blob):
        self.shutdown()

    def op_policy(self, rid, req, blob):
        self.reply(rid, {'changed': policy_snapshot()[0] != self.policy, 'blind': self.policy_blind})

    # ---- requests: files, answered at once

    def op_stat(self, rid, req, blob):
        self.reply(rid, stat_path(req['path']))

    def op_mkdir(self, rid, req, blob):
        mkdir_all(req['path'], req['mode'])
        self.reply(rid, {})

    def op_chmod(self, rid, req, blob):
        os.chmod(req['path'], req['mode'])
        self.reply(rid, {})

    def op_rmtree(self, rid, req, blob):
        remove_all(req['path'])
        if not req.get('noreply'):
            self.reply(rid, {})

    def op_put(self, rid, req, blob):
        atomic_write(req['path'], blob, req['mode'])
        self.reply(rid, {})

    def op_get(self, rid, req, blob):
        with open(req['path'], 'rb') as f:
            data = f.read()
        self.reply(rid, {}, data)

    # ---- requests: commands

    def env_for(self, overrides):
        env = dict(os.environ)
        apply_env(env, overrides or {})
        return env

    def op_exec(self, rid, req, blob):
        pty = req.get('pty')
        if pty is not None:
            self.exec_pty(rid, req, pty)
            return
        p = Proc(rid, 'exec')
        p.popen = subprocess.Popen(
            ['/bin/sh', '-c', req['cmd']],
            stdin=subprocess.PIPE if req.get('stdin') else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=self.env_for(session_env(None, None, req.get('env'))), cwd=self.cwd,
            close_fds=True, start_new_session=True)
        p.pid = p.popen.pid
        self.procs[rid] = p
        p.out_fd = os.dup(p.popen.stdout.fileno())
        p.err_fd = os.dup(p.popen.stderr.fileno())
        p.popen.stdout.close()
        p.popen.stderr.close()
        self.watch(p.out_fd, 'pout', p)
        self.watch(p.err_fd, 'perr', p)
        if p.popen.stdin is not None:
            p.in_fd = os.dup(p.popen.stdin.fileno())
            p.popen.stdin.close()
            _set_nonblock(p.in_fd)
            self.fdmap[p.in_fd] = ('pin', p)

    def exec_pty(self, rid, req, pty):
        """exec on a new terminal: all output on the master, read as
        stdout; stdin, if any, is written to it, and its end dropped
        (as sshd does: the terminal stays open)."""
        master, slave = open_pty(pty)
        try:
            env = self.env_for(session_env(pty, os.ttyname(slave), req.get('env')))
            p = Proc(rid, 'exec')
            # Single-threaded, so preexec_fn is safe; it runs after setsid.
            ctty = None if pty.get('noctty') else lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0)
            p.popen = subprocess.Popen(
                ['/bin/sh', '-c', req['cmd']], stdin=slave, stdout=slave, stderr=slave,
                env=env, cwd=self.cwd, close_fds=True, start_new_session=True,
                preexec_fn=ctty)
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        p.pid = p.popen.pid
        self.procs[rid] = p
        p.out_fd, p.pty = master, True
        self.watch(master, 'pout', p)
        if req.get('stdin'):
            p.in_fd = os.dup(master)
            _set_nonblock(p.in_fd)
            self.fdmap[p.in_fd] = ('pin', p)

    # ---- processes: their stdin, output, exit status

    def write_stdin(self, p):
        fd = p.in_fd
        if fd is None:
            return
        while p.inbuf:
            try:
                n = os.write(fd, p.inbuf.view())
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                # EPIPE: the command stopped reading; drop its input.
                p.inbuf.clear()
                p.in_eof = True
                break
            p.inbuf.consume(n)
        registered = fd in self.sel.get_map()
        if p.inbuf and not registered:
            self.sel.register(fd, selectors.EVENT_WRITE, ('pin', p))
        elif not p.inbuf and registered:
            self.sel.unregister(fd)
        if not p.inbuf and p.in_eof:
            p.in_fd = None
            self.unwatch(fd)

    def read_pipe(self, fd, kind, p):
        try:
            n = os.readv(fd, [self.pscratch])
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            n = 0
        if n:
            data = memoryview(self.pscratch)[:n]
            self.send(T_STDOUT if kind == 'pout' else T_STDERR, p.id, data)
            zero(data)
            return
        self.unwatch(fd)
        if kind == 'pout':
            p.out_fd = None
        else:
            p.err_fd = None
        self.maybe_finish(p)

    def read_status(self, p):
        """A task's early exit status; EOF without one means it died."""
        if p.stat_fd is None:
            return  # finished by an event earlier in the same batch
        try:
            data = os.read(p.stat_fd, 64)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b''
        if data:
            p.statbuf += data
            return
        self.unwatch(p.stat_fd)
        p.stat_fd = None
        if p.statbuf and p.status is None:
            try:
                p.status = (int(p.statbuf) & 0xff) << 8
            except ValueError:
                pass  # cut short by a kill: the zygote's wait status below
        if p.status is None:
            p.status = p.wait_status
        if p.status is None and p.error is None and p.zygote is not None and p.zygote.dead:
            p.error = {'error': 'task of %s died and its zygote is gone' % p.zygote.entry.fqn}
        self.maybe_finish(p)

    def maybe_finish(self, p):
        if p.done or p.out_fd is not None or p.err_fd is not None:
            return
        if p.status is None and p.error is None:
            return
        p.done = True
        self.procs.pop(p.id, None)
        if p.in_fd is not None:
            self.unwatch(p.in_fd)
            p.in_fd = None
        if p.stat_fd is not None:
            self.unwatch(p.stat_fd)
            p.stat_fd = None
        if p.zygote is not None:
            p.zygote.procs.pop(p.id, None)
            self.maybe_close(p.zygote)
            if p.error is None and not p.statbuf:
                # It did not get to the end of the wrapper's try, where
                # stock's removes its payload dir.
                self.payload_forget(p.zygote.entry)
            else:
                self.payload_down(p.zygote.entry)
        if p.error is not None:
            self.reply(p.id, p.error)
            return
        st = p.status
        res = {}
        if os.WIFSIGNALED(st):
            line = p.shell and not p.cancelled and shell_news(p.shell, st)
            if line:
                if p.pty:
                    self.send(T_STDOUT, p.id, line.replace(b'\n', b'\r\n'))
                else:
                    self.send(T_STDERR, p.id, line)
            res['signal'] = os.WTERMSIG(st)
            res['exit'] = 128 + os.WTERMSIG(st)
        else:
            res['exit'] = os.WEXITSTATUS(st)
        if p.cancelled:
            res['cancelled'] = True
        if p.check_us:
            res['check_us'] = p.check_us
        if p.policy and policy_snapshot()[0] != self.policy:
            res['policy_changed'] = True
        passwd = stat_key(PASSWD)
        if passwd != self.passwd:
            # Homes may have moved (usermod -d): `echo ~user` is asked again.
            self.passwd = passwd
            res['passwd_changed'] = True
        self.reply(p.id, res)

    def kill(self, p):
        if p.pid is None:
            return
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            try:
                os.kill(p.pid, signal.SIGKILL)
            except OSError:
                # Gone already (ESRCH), or its pid is a process not ours
                # now (EPERM): nothing to kill.
                pass

    def reap(self):
        """SIGCHLD: collect the commands and zygotes that exited."""
        drain(self.wake_r)
        for p in list(self.procs.values()):
            if p.popen is not None and p.status is None:
                try:
                    pid, st = os.waitpid(p.pid, os.WNOHANG)
                except ChildProcessError:
                    pid, st = p.pid, 255 << 8
                if pid:
                    # Reaped here: tell Popen so it does not wait again.
                    p.popen.returncode = -os.WTERMSIG(st) if os.WIFSIGNALED(st) else os.WEXITSTATUS(st)
                    p.status = st
                    self.maybe_finish(p)
        for z in list(self.zygotes.values()):
            self.zygote_gone(z)

    def zygote_gone(self, z):
        """Whether z has exited (then reaped, and its death handled)."""
        try:
            pid, _ = os.waitpid(z.pid, os.WNOHANG)
        except ChildProcessError:
            pid = z.pid
        if not pid:
            return False
        self.zygotes.pop(z.pid, None)
        self.zygote_died(z)
        return True

    # ---- requests: modules

    def op_module(self, rid, req, blob):
        """Run an AnsiballZ module: blob holds the zip (the first time),
        the template (zlib; whole the first time, later the bytes between
        its common prefix and suffix with the first one), then the files
        to write first."""
        entry, off = self.zip_entry(req, blob)
        if entry is None:
            self.reply(rid, {'error': 'zip %s unknown to this agent' % req['hash'][:12], 'code': 'nozip'})
            return
        home = entry.home
        if home.name is None:
            home.name = req.get('name') or 'module'
        if entry.fqn is None:
            # Go's package ansiballz found it, in every format.
            entry.fqn = req.get('fqn') or ''
        t0 = time.perf_counter()
        changed = ((not req.get('noenv') and ([_mtime(p) for p in self.env_files] != self.env_mtimes or stale(self.interp_deps)))
                   or stale(self.deps))
        checked = time.perf_counter() - t0
        if changed:
            self.reply(rid, {'error': 'login environment or site imports changed; agent must restart', 'code': 'restart'})
            return
        if home.zygote is not None:
            # Dead before its SIGCHLD was read, the task would be lost in
            # its socket, which a fork of it not yet detached may hold
            # open a moment longer: a new zygote runs it.
            self.zygote_gone(home.zygote)
        self.payload_up(home)
        try:
            # Before the template is read: a zygote forked now must not
            # inherit this task's arguments.
            z, zchecked = self.zygote_for(entry)
            tpl, off = self.template(entry, req, blob, off)
        except BaseException:
            self.payload_down(home)
            raise
        try:
            owner = req.get('owner')
            for path, mode in req.get('dirs') or []:
                mkdir_all(path, mode, owner)
            for path, mode, n in req.get('files') or []:
                atomic_write(path, blob[off:off + n], mode, owner)
                off += n
            if req.get('dirs') or req.get('files'):
                # The daemon may now let an rm of these dirs go ahead,
                # though the task runs on.
                self.send(T_WRITTEN, rid)
            p = self.start_task(rid, z, req, tpl)
            p.check_us = int((checked + zchecked) * 1e6)
            p.policy = bool(req.get('policy'))
        finally:
            zero(tpl)  # sent on, or not to be: the arguments go with the task
            self.payload_down(home)

    def zip_entry(self, req, blob):
        """The request's zip, stored on the first request that carries it
        or names a held zip of the same files (its 'twin' key), and the
        offset in blob after it. (None, _) if the agent has not got it."""
        digest = req['hash']
        zlen = req.get('zip', 0)
        entry = self.zips.get(digest)
        if entry is None and (zlen or req.get('twin')):
            if zlen:
                zdata = bytes(blob[:zlen])
                if hashlib.sha256(zdata).hexdigest() != digest:
                    raise ValueError('zip hash mismatch')
                fkey = zip_files_key(zdata)
            else:
                fkey = req['twin']  # not sent again: a zip of the same files may be held
            home = self.zip_homes.get(fkey) if fkey else None
            if home is not None:
                entry = ZipEntry(digest, home.path, home.b64, home)
            elif zlen:
                # Written once its template is read (store_zip).
                entry = ZipEntry(digest, None, base64.b64encode(zdata))
                entry.zdata = zdata
                if fkey:
                    self.zip_homes[fkey] = entry
            if entry is not None:
                self.zips[digest] = entry
        return entry, zlen

    # A zip's payload dir is on disk while its tasks run, as stock's
    # wrapper has its own for the module's run: named as the wrapper names
    # it (TMP/ansible_NAME_payload_XXXXXXXX/ansible_NAME_payload.zip, TMP
    # the agent's temp root, NAME the module's name there, which Go's
    # package ansiballz found), so that a traceback through the module
    # reads as stock's. Its zygote imports from that path (zipimport reads
    # the file at each import), so the path stays the zygote's: written
    # again when a task comes, removed when none runs and the zygote is
    # not importing. A task that ends without its status (killed,
    # os._exit) leaves it, as stock's wrapper leaves its dir then.

    def payload_up(self, home):
        """Put home's zip on disk, in its dir, if it is not there."""
        if home.up:
            return
        if home.pdir is not None:
            try:
                os.mkdir(home.pdir, 0o700)
            except OSError:
                # Taken meanwhile (or left by a killed task): a new dir,
                # and a new zygote to import from it.
                self.payload_forget(home)
        if home.pdir is None:
            home.pdir = tempfile.mkdtemp(prefix='ansible_%s_payload_' % home.name, dir=self.tmp)
            home.path = os.path.join(home.pdir, 'ansible_%s_payload.zip' % home.name)
        # Read-only: tasks run their modules from it (PAYLOAD_LINES). No
        # fsync: it goes with the task, as stock's.
        try:
            fd = os.open(home.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o400)
            try:
                write_all(fd, home.zdata)
            finally:
                os.close(fd)
        except OSError:
            # No space, say: the task fails; the next one tries again.
            shutil.rmtree(home.pdir, ignore_errors=True)
            raise
        home.up = True

    def payload_down(self, home):
        """Remove home's payload dir unless a task of its or a zygote
        importing from it still needs it."""
        if not home.up:
            return
        for p in self.procs.values():
            if p.zygote is not None and p.zygote.entry is home:
                return
        for z in self.zygotes.values():
            if z.entry is home and z.deps is None and not z.dead:
                return
        home.up = False
        try:
            os.unlink(home.path)
            os.rmdir(home.pdir)
        except OSError:
            # A task wrote there too (stock's rmtree takes that as well).
            shutil.rmtree(home.pdir, ignore_errors=True)

    def payload_forget(self, home):
        """Leave home's payload dir where it is: the next task writes a new
        one, for a new zygote."""
        home.up = False
        home.pdir = home.path = None
        if home.zygote is not None:
            self.retire(home.zygote)

    def template(self, entry, req, blob, off):
        """The request's template (a bytearray, for the caller to zero once
        it is handed over), from blob at off, and the offset after it."""
        tlen = req['tpl']
        ctpl = blob[off:off + tlen]
        off += tlen
        delta = req.get('delta')
        # Decompressed into one buffer of its final size (the client says
        # it): a growing one would leave copies of the arguments behind.
        if req.get('plain'):
            raw = ctpl  # a small delta, sent as it is (blob is zeroed by the caller)
        else:
            raw = zlib.decompress(ctpl, zlib.MAX_WBITS, req.get('raw') or zlib.DEF_BUF_SIZE)
        if delta:
            # The bytes between the common prefix and suffix with the base.
            base = entry.base
            if base is None:
                forget_bytes(raw)
                raise ValueError('base template for %s not set' % entry.digest[:12])
            prefix, suffix = delta
            tpl = bytearray(prefix + len(raw) + suffix)
            put(tpl, 0, memoryview(base)[:prefix])
            put(tpl, prefix, raw)
            put(tpl, prefix + len(raw), memoryview(base)[len(base) - suffix:])
        else:
            # A whole template comes with its zip: the base from now on, as
            # the client keeps it (its parameters blanked: they may be secret).
            tpl = bytearray(raw)
            base = bytearray(raw)
            blank_params(base, req.get('params'))
            entry.base = bytes(base)
        forget_bytes(raw)
        return tpl, off

    def zygote_for(self, entry):
        """The zygote that runs entry's tasks, started if there is none, and
        the seconds spent checking that what it imported is unchanged."""
        entry = entry.home
        z = entry.zygote
        t0 = time.perf_counter()
        changed = z is not None and z.deps is not None and stale(z.deps)
        checked = time.perf_counter() - t0
        if z is not None and (z.closing or changed):
            # A file it imported changed, or a new one could shadow one:
            # a fresh python would import them anew, so a fresh zygote does.
            self.retire(z)
            z = None
        if z is None:
            z = self.spawn_zygote(entry)
        z.last_used = time.time()
        return z, checked

    def start_task(self, rid, z, req, tpl):
        """Start task rid in z's spare if it offered one, else through z,
        and return its Proc. Its stdout and stderr pipes (or a terminal)
        and its status pipe go with it; the agent keeps the reading ends."""
        p = Proc(rid, 'module')
        p.zygote = z
        p.shell = req.get('shell')
        p.pty = req.get('pty') is not None
        msg = {'id': rid, 'env': req.get('env') or {}, 'cwd': self.cwd,
               'script': req.get('script') or None,
               'params': req.get('params'), 'time': req.get('time'), 'payload': req.get('payload')}
        resolv = _mtime(RESOLV)
        if resolv != z.resolv:
            # The zygote and its waiting fork reload the resolver
            # configuration, as a fresh python would read it.
            msg['res_init'] = True
            z.resolv = resolv
        pty = req.get('pty')
        if pty is not None:
            # The task's stdout is the master; the slave goes to the task
            # (and is closed here once sent: the master reads EIO, taken
            # as EOF, once the last slave fd is closed).
            ro, slave = open_pty(pty)
            msg['pty'] = pty
            tfds = [slave]
        else:
            ro, wo = os.pipe()
            re_, we = os.pipe()
            tfds = [wo, we]
        rs, ws = os.pipe()
        tfds.append(ws)
        self.procs[rid] = p
        z.procs[rid] = p
        p.out_fd, p.stat_fd = ro, rs
        self.watch(ro, 'pout', p)
        if pty is None:
            p.err_fd = re_
            self.watch(re_, 'perr', p)
        self.watch(rs, 'pstat', p)
        if z.spare is not None and not z.outq and self.to_spare(z, p, msg, tpl, tfds):
            return p
        # The zygote may be busy importing: queue, never block on it.
        z.outq.append([encode_msg(msg, tpl), tfds, p, 0, 0])
        self.zflush(z)
        return p

    def to_spare(self, z, p, msg, tpl, tfds):
        """Send a task to the spare z offered, and tell z it was used (with
        the template, whose compiled shape its next forks inherit). False
        if the spare is gone; the task then goes through z."""
        pid, ctl, learn = z.spare
        z.spare = None
        if learn:
            msg['learn'] = True
        try:
            send_msg(ctl, msg, tpl, tfds)
        except OSError:
            msg.pop('learn', None)
            return False
        finally:
            ctl.close()
        for fd in tfds:
            os.close(fd)
        p.pid = pid
        used = {'used': pid, 'id': p.id}
        if msg.get('res_init'):
            used['res_init'] = True
        # The zygote learns the template's shape, not the task's arguments,
        # and only once: every write it makes after a fork copies a page.
        shape = b''
        digest = shape_digest(tpl, msg['params'], msg['time'])
        if digest not in z.shapes:
            if len(z.shapes) >= WrapperCompiler.MAX:
                z.shapes.clear()
            z.shapes.add(digest)
            used.update(params=msg['params'], time=msg['time'], payload=msg['payload'])
            shape = bytearray(tpl)
            blank_params(shape, msg['params'])
        z.outq.append([encode_msg(used, shape), None, None, 0, 0])
        self.zflush(z)
        return True

    # ---- zygotes

    def zflush(self, z):
        """Send queued task messages to z; the fds go with a message's
        first bytes, and are closed here once sent."""
        # Nothing goes to a zygote before it is warm: it has imported after
        # the tasks queued arrived, so they need no check.
        while z.outq and z.sock is not None and z.deps is not None:
            item = z.outq[0]
            data, fds = memoryview(item[0])[item[4]:], item[1]
            try:
                if fds:
                    n = z.sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                                 struct.pack('%di' % len(fds), *fds))])
                    for fd in fds:
                        os.close(fd)
                    item[1] = None
                else:
                    n = z.sock.send(data)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self.zygote_died(z)
                return
            item[4] += n
            if item[4] == len(item[0]):
                zero(item[0])
                z.outq.pop(0)
        if z.sock is not None:
            ev = selectors.EVENT_READ | (selectors.EVENT_WRITE if z.outq and z.deps is not None else 0)
            if ev != z.events:
                z.events = ev
                self.sel.modify(z.sock, ev, ('zyg', z))

    def spawn_zygote(self, entry):
        if not self.spawning_changed:
            # Here, once, for every zygote (~7 ms): the memory it frees
            # is then filled by the zygotes' imports, not by their tasks,
            # which would copy it on write.
            self.spawning_changed = True
            spawn_without_noop_preexec()
        live = [z for z in self.zygotes.values() if not z.closing]
        if len(live) >= MAX_ZYGOTES:
            # Least recently used first, idle ones before busy ones.
            self.retire(min(live, key=lambda z: (bool(z.procs), z.last_used)))
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            try:
                signal.set_wakeup_fd(-1)
                # The agent's teardown ends it (its socket closes): a
                # SIGHUP to the agent's process group must not end it
                # first and leave its seed and spares to init.
                signal.signal(signal.SIGHUP, signal.SIG_IGN)
                close_fds_except(b.fileno(), self.code_fd)
                self.forget_in_fork()
            except BaseException:
                os._exit(1)
            ZygoteServer(b, entry.path, entry.fqn, entry.b64, self.stdio_like, self.code_fd).run()
        b.close()
        a.setblocking(False)
        z = Zygote(pid, a, entry)
        entry.zygote = z
        self.zygotes[pid] = z
        self.sel.register(a, selectors.EVENT_READ, ('zyg', z))
        return z

    def forget_in_fork(self):
        """In a zygote just forked: overwrite the agent's buffers it
        inherited (what was read from the channel and the pipes, the frame
        being handled and its request's environment values, what is queued
        either way), which may hold other tasks' arguments and output."""
        zero(self.rscratch)
        zero(self.pscratch)
        self.frames.q.clear()
        self.outbuf.clear()
        for p in self.procs.values():
            p.inbuf.clear()
        if self.handling is not None:
            zero(self.handling)
        if self.handling_req is not None:
            # The request that made this zygote: its environment values
            # (the agent overwrites only its own copy).
            forget_request(self.handling_req)
            self.handling_req = None

    def retire(self, z):
        """No new tasks go to z; it exits once its running tasks are done."""
        if z.entry.zygote is z:
            z.entry.zygote = None
        z.closing = True
        z.drop_spare()
        self.maybe_close(z)

    def maybe_close(self, z):
        if not z.closing or z.procs or z.outq or z.sock is None:
            return
        # The zygote exits when its socket ends; reap() collects it.
        self.close_sock(z)

    def close_sock(self, z):
        try:
            self.sel.unregister(z.sock)
        except KeyError:
            pass  # never registered
        z.sock.close()
        z.sock = None

    def zygote_died(self, z):
        """The zygote exited or its socket broke. Its tasks go on and report
        through their status pipes; those that died without a word fail."""
        if z.dead:
            return
        z.dead = True
        self.retire(z)
        for fd in z.fdq:
            os.close(fd)
        z.fdq = []
        # Messages not started yet go to a new zygote; one cut short is lost
        # (its pipes close, so its request fails below or in read_status).
        pending = []
        for item in z.outq:
            if item[1] is not None and item[3] < 2:
                item[3] += 1
                pending.append(item)
            else:
                zero(item[0])
                for fd in item[1] or ():
                    os.close(fd)
        z.outq = []
        if z.sock is not None:
            self.close_sock(z)
        if pending:
            self.payload_up(z.entry)
            nz = z.entry.zygote or self.spawn_zygote(z.entry)
            for item in pending:
                p = item[2]
                z.procs.pop(p.id, None)
                p.zygote = nz
                nz.procs[p.id] = p
                nz.outq.append(item)
            self.zflush(nz)
        for p in list(z.procs.values()):
            if p.status is None and p.error is None and p.stat_fd is None and not p.statbuf:
                p.error = {'error': 'task of %s died and its zygote is gone' % z.entry.fqn}
                self.maybe_finish(p)
        z.procs.clear()
        self.maybe_close(z)
        self.payload_down(z.entry)

    def read_zygote(self, z):
        if z.sock is None:
            return
        try:
            data, anc, _flags, _addr = z.sock.recvmsg(65536, socket.CMSG_SPACE(4 * FD_SIZE))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data, anc = b'', []
        z.fdq.extend(fds_of(anc))
        if not data:
            self.zygote_died(z)
            return
        for m in z.reader.feed(data):
            if 'ready' in m:
                z.deps = m['ready']
                self.zflush(z)
                self.payload_down(z.entry)
            elif 'spare' in m:
                self.spare_offered(z, m)
            else:
                self.task_news(z, m)

    def spare_offered(self, z, m):
        """z offers a spare: hold it (its control socket came with the
        offer's first byte) for z's next task."""
        if not z.fdq:
            return
        fd = z.fdq.pop(0)
        os.set_inheritable(fd, False)
        z.drop_spare()
        ctl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fd)
        if z.closing:
            ctl.close()
        else:
            z.spare = (m['spare'], ctl, m.get('learn'))

    def task_news(self, z, m):
        """z forked a task (its pid) or saw it exit (its wait status)."""
        p = z.procs.get(m.get('id'))
        if p is None:
            return
        if 'pid' in m:
            p.pid = m['pid']
            if p.cancelled:
                self.kill(p)
        if 'status' in m:
            if p.stat_fd is not None:
                # The status the task wrote before its teardown is
                # python's exit status; the teardown may still end in
                # a signal (SIGHUP once its terminal is hung up).
                p.wait_status = m['status']
            else:
                p.status = m['status']
                self.maybe_finish(p)


def main():
    try:
        agent = Agent()
    except Exception as e:
        sys.stderr.write('ansible-bridge agent: cannot start: %s\n' % (e,))
        sys.stderr.flush()
        os._exit(1)
    try:
        agent.run()
    finally:
        agent.shutdown()


if __name__ == '__ansible_bridge_agent__':
    main()
