/*
 * ansible-bridge-front: the shim's hot path, in C.
 *
 * Ansible starts ssh once per step (and sftp, scp): six times per task
 * with its defaults, once with pipelining. On the machines we measure,
 * any Go binary takes ~5 ms of wall to start and exit (the runtime's
 * cpuid probes trap in a VM, it reads cgroup files and starts threads);
 * this static C binary takes ~0.1 ms linked against musl, ~0.5 ms
 * against glibc (whose start probes the CPU with cpuid; internal/cbuild).
 * Ansible waits for each start, so a C version of the bench's floor ran
 * its 100-item loop in 0.80 x the time of the Go one.
 *
 * This program does only what an invocation the daemon serves needs:
 * it sends the daemon its argv, environment, directory, umask and
 * whether it could prompt (the hello), pumps stdin once the daemon
 * accepts, writes what the daemon sends to stdout and stderr, forwards
 * a terminating signal, and exits with the status the daemon gives. The
 * daemon parses the command line.
 *
 * Everything else goes to the Go shim, ansible-bridge-shim, beside this
 * binary, by exec (same pid, argv and environment):
 *   - before the daemon is reached (stdin a terminal, the bridge
 *     disabled, the socket unusable or no daemon: the Go shim starts the
 *     daemon, falls back or explains, as before), untouched;
 *   - when the daemon answers with a frame this program does not handle
 *     (a prompt, a fallback, a handover), with the connection: the frame
 *     is left unread on it and ANSIBLE_BRIDGE_RESUME tells the Go shim
 *     the fd and how far the conversation got (fakessh/resume.go).
 *
 * With ANSIBLE_BRIDGE_MASTER_STUB set it is instead the process the
 * daemon starts for each ControlPersist master (master_stub below).
 *
 * The frame format and the hello's fields are package wire's
 * (fakessh/wire); fakessh/front_test.go holds this program to the hello
 * the Go shim would send and to its answers.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define EXIT_SSH_ERROR 255
#define STOP_WAIT_MS 2000 /* stopWait in fakessh/shim.go */
#define HEADER_LEN 5
#define MAX_PAYLOAD (1 << 20)
#define STDIN_PIPE_SIZE (1 << 20) /* fakessh's stdinPipeSize */
#define STDIN_CHUNK (256 << 10)   /* what the Go shim reads at once */

#define SHIM_BINARY "ansible-bridge-shim"
#define FULL_BINARY "ansible-bridge"
#define RESUME_ENV "ANSIBLE_BRIDGE_RESUME"
#define IGNORED_ENV "ANSIBLE_BRIDGE_IGNORED_SIGNALS" /* fakessh.IgnoredSignalsEnv */
#define STUB_ENV "ANSIBLE_BRIDGE_MASTER_STUB"         /* fakessh.MasterStubEnv */
#define STUB_FD 3
#define BATCH_OPEN_ENV "ANSIBLE_BRIDGE_BATCH_OPEN" /* fakessh.BatchOpenEnv */
#define BATCH_WAIT_MS 2000                          /* fakessh.batchWait */
#define BATCH_MAX (512 << 10)                       /* fakessh.BatchMax */

extern char **environ;

static char **g_argv;
static const char *g_prog;
static int stdin_tty; /* a terminal that is not our controlling one */
static int conn = -1;  /* to the daemon */

/* ---------------------------------------------------------------- handover */

/* go_shim is the Go shim beside this binary (or the full binary, which is
 * a shim too when invoked as ssh). */
static int go_shim(char *out, size_t size)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		return -1;
	self[n] = 0;
	char *slash = strrchr(self, '/');
	if (!slash)
		return -1;
	*slash = 0;
	const char *names[] = {SHIM_BINARY, FULL_BINARY};
	for (size_t i = 0; i < 2; i++) {
		if ((size_t)snprintf(out, size, "%s/%s", self, names[i]) < size && access(out, X_OK) == 0)
			return 0;
	}
	return -1;
}

/* caller_sigpipe is SIGPIPE's disposition as the caller left it: this
 * program ignores it (ssh does), the program it hands over to gets it
 * back. */
static struct sigaction caller_sigpipe;

/* quit_ignored, term_ignored: the caller left SIGQUIT, SIGTERM ignored.
 * ssh keeps them so until its session starts (SIGQUIT for good, as a mux
 * client); the Go shim, whose runtime takes both over before main,
 * learns it from IGNORED_ENV. */
static int quit_ignored, term_ignored;

/* handover execs the Go shim with this process's argv; resume (or NULL)
 * is ANSIBLE_BRIDGE_RESUME's value for it. It does not return. */
static void handover(const char *resume)
{
	char shim[PATH_MAX];
	if (go_shim(shim, sizeof shim) != 0) {
		fprintf(stderr, "ansible-bridge: %s: no " SHIM_BINARY " beside this binary\r\n", g_prog);
		_exit(EXIT_SSH_ERROR);
	}
	if (resume)
		setenv(RESUME_ENV, resume, 1);
	if (quit_ignored || term_ignored)
		setenv(IGNORED_ENV, quit_ignored && term_ignored ? "QUIT TERM" : quit_ignored ? "QUIT" : "TERM", 1);
	sigaction(SIGPIPE, &caller_sigpipe, NULL);
	execv(shim, g_argv);
	fprintf(stderr, "ansible-bridge: %s: exec %s: %s\r\n", g_prog, shim, strerror(errno));
	_exit(EXIT_SSH_ERROR);
}

/* lost ends the process as the Go shim does when the daemon goes away. */
static void lost(const char *what)
{
	fprintf(stderr, "ansible-bridge: %s: %s\r\n", g_prog, what);
	exit(EXIT_SSH_ERROR);
}

/* ---------------------------------------------------------------- socket */

/* clean_abs: an absolute path without "." or ".." components, which Go's
 * filepath.Join and Dir would rewrite. */
static int clean_abs(const char *p)
{
	if (p[0] != '/')
		return 0;
	for (const char *s = p; (s = strchr(s, '/')) != NULL; s++) {
		if (s[1] == '.' && (s[2] == '/' || s[2] == 0 || (s[2] == '.' && (s[3] == '/' || s[3] == 0))))
			return 0;
	}
	return 1;
}

/* socket_path is wire.SocketPath, or -1 where this program would have to
 * clean the path first (the Go shim then decides). */
static int socket_path(char *out, size_t size)
{
	const char *p = getenv("ANSIBLE_BRIDGE_SOCKET");
	int n;
	if (p && *p)
		n = snprintf(out, size, "%s", p);
	else if ((p = getenv("XDG_RUNTIME_DIR")) && *p)
		n = snprintf(out, size, "%s/ansible-bridge/bridge.sock", p);
	else {
		const char *tmp = getenv("TMPDIR");
		n = snprintf(out, size, "%s/ansible-bridge-%u/bridge.sock", tmp && *tmp ? tmp : "/tmp", (unsigned)getuid());
	}
	if (n < 0 || (size_t)n >= size || !clean_abs(out))
		return -1;
	size_t len = strlen(out);
	return len > 1 && out[len - 1] == '/' ? -1 : 0;
}

/* private_dir is wire.CheckPrivateDir: a real directory of ours, 0700. */
static int private_dir(const char *sock)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s", sock);
	char *slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = 0;
	else
		*slash = 0;
	struct stat st;
	return lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid() && (st.st_mode & 077) == 0 ? 0 : -1;
}

/* dial connects to the daemon and checks that it runs as this user. */
static int dial(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof sa.sun_path)
		return -1;
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct ucred cred;
	socklen_t len = sizeof cred;
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != getuid()) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ---------------------------------------------------------------- hello */

struct buf {
	char *p;
	size_t n, cap;
};

static void put(struct buf *b, const char *s, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2 + 4096;
		if (!(b->p = realloc(b->p, b->cap)))
			lost("out of memory");
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
}

static void puts_(struct buf *b, const char *s) { put(b, s, strlen(s)); }

/* utf8 reports whether s is UTF-8, as Go's utf8.ValidString: JSON
 * carries nothing else (Go's decoder would make each stray byte
 * U+FFFD), so main hands anything else to the Go shim, which runs the
 * real program. */
static int utf8(const char *s)
{
	for (const unsigned char *c = (const unsigned char *)s; *c;) {
		int n = *c < 0x80 ? 0 : (*c & 0xe0) == 0xc0 ? 1 : (*c & 0xf0) == 0xe0 ? 2 : (*c & 0xf8) == 0xf0 ? 3 : -1;
		if (n < 0 || (n == 1 && *c < 0xc2) || (n == 3 && *c > 0xf4))
			return 0;
		unsigned cp = n == 0 ? *c : *c & (0x3f >> n);
		c++;
		for (int i = 0; i < n; i++, c++) {
			if ((*c & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (*c & 0x3f);
		}
		if ((n == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)))
			return 0;
	}
	return 1;
}

/* put_json_string quotes s, which is UTF-8 (utf8). */
static void put_json_string(struct buf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	put(b, "\"", 1);
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		char esc[7] = "\\u00";
		switch (*c) {
		case '"': put(b, "\\\"", 2); break;
		case '\\': put(b, "\\\\", 2); break;
		case '\n': put(b, "\\n", 2); break;
		case '\r': put(b, "\\r", 2); break;
		case '\t': put(b, "\\t", 2); break;
		default:
			if (*c < 0x20) {
				esc[4] = hex[*c >> 4];
				esc[5] = hex[*c & 15];
				put(b, esc, 6);
			} else
				put(b, (const char *)c, 1);
		}
	}
	put(b, "\"", 1);
}

/* cwd is os.Getwd: $PWD when it names the current directory. */
static void cwd(char *out, size_t size)
{
	const char *pwd = getenv("PWD");
	struct stat dot, st;
	if (pwd && pwd[0] == '/' && strlen(pwd) < size && stat(".", &dot) == 0 && stat(pwd, &st) == 0 &&
	    dot.st_dev == st.st_dev && dot.st_ino == st.st_ino) {
		strcpy(out, pwd);
		return;
	}
	if (!getcwd(out, size))
		out[0] = 0;
}

/* can_prompt is the Go shim's: as OpenSSH's read_passphrase decides
 * between the terminal and an askpass program (fakessh/askpass.go). */
static int can_prompt(void)
{
	const char *display = getenv("DISPLAY"), *req = getenv("SSH_ASKPASS_REQUIRE");
	int allow = display && *display, use = 0;
	if (req && strcasecmp(req, "force") == 0)
		use = allow = 1;
	else if (req && strcasecmp(req, "prefer") == 0)
		use = allow;
	else if (req && strcasecmp(req, "never") == 0)
		allow = 0;
	if (!use) {
		int tty = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
		if (tty < 0)
			use = 1;
		else
			close(tty);
	}
	return !use || allow;
}

/* shadowed: an earlier entry of environ has e's name. Go's os.Environ
 * leaves such a duplicate out (the first one is what getenv sees). */
static int shadowed(char **e)
{
	const char *eq = strchr(*e, '=');
	if (!eq)
		return 0;
	for (char **p = environ; p < e; p++) {
		if (strncmp(*p, *e, (size_t)(eq - *e) + 1) == 0)
			return 1;
	}
	return 0;
}

static void hello(struct buf *b, int argc, char **argv)
{
	char dir[PATH_MAX], num[32];
	puts_(b, "{\"prog\":");
	put_json_string(b, g_prog);
	if (argc > 0) {
		puts_(b, ",\"argv0\":");
		put_json_string(b, argv[0]);
	}
	puts_(b, ",\"argv\":[");
	for (int i = 1; i < argc; i++) {
		if (i > 1)
			put(b, ",", 1);
		put_json_string(b, argv[i]);
	}
	puts_(b, "],\"cwd\":");
	cwd(dir, sizeof dir);
	put_json_string(b, dir);
	puts_(b, ",\"env\":[");
	int first = 1;
	for (char **e = environ; *e; e++) {
		if (shadowed(e))
			continue;
		if (!first)
			put(b, ",", 1);
		first = 0;
		put_json_string(b, *e);
	}
	mode_t mask = umask(0);
	umask(mask);
	struct winsize ws = {0};
	if (stdin_tty && ioctl(0, TIOCGWINSZ, &ws) != 0)
		ws.ws_row = ws.ws_col = 0;
	snprintf(num, sizeof num, "%d", ws.ws_row);
	puts_(b, stdin_tty ? "],\"stdin_tty\":true,\"rows\":" : "],\"stdin_tty\":false,\"rows\":");
	puts_(b, num);
	snprintf(num, sizeof num, "%d", ws.ws_col);
	puts_(b, ",\"cols\":");
	puts_(b, num);
	struct termios tio;
	if (stdin_tty && tcgetattr(0, &tio) == 0) {
		/* ssh sends these modes with a pty-req (fakessh.TerminalModes) */
		char t[128];
		snprintf(t, sizeof t, ",\"termios\":{\"iflag\":%u,\"oflag\":%u,\"cflag\":%u,\"lflag\":%u,\"cc\":[",
			 (unsigned)tio.c_iflag, (unsigned)tio.c_oflag, (unsigned)tio.c_cflag, (unsigned)tio.c_lflag);
		puts_(b, t);
		for (int i = 0; i < 19 && i < NCCS; i++) {
			snprintf(num, sizeof num, i ? ",%u" : "%u", (unsigned)tio.c_cc[i]);
			puts_(b, num);
		}
		puts_(b, "]}");
	}
	puts_(b, ",\"front\":true,\"can_prompt\":");
	puts_(b, can_prompt() ? "true" : "false");
	snprintf(num, sizeof num, "%d", (int)getpid());
	puts_(b, ",\"pid\":");
	puts_(b, num);
	snprintf(num, sizeof num, "%d", (int)mask);
	puts_(b, ",\"umask\":");
	puts_(b, num);
	puts_(b, "}");
}

/* ---------------------------------------------------------------- frames */


/* wait_fd waits until fd is ready for events (a non-blocking fd
 * inherited from the caller). */
static void wait_fd(int fd, short events)
{
	struct pollfd p = {.fd = fd, .events = events};
	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
}

/* write_all writes to a stdio fd; -1 on an error (EPIPE included: SIGPIPE
 * is ignored). */
static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				wait_fd(fd, POLLOUT);
				continue;
			}
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int accepted;	  /* the daemon took the invocation on: a session */
static char *signal_line; /* the daemon's 's' frame: written if a signal ends us */
static size_t signal_line_n;

/* gone ends the process when the daemon goes away: after the accept, as
 * mux.c's mux_client_request_session when its master dies ("Shared
 * connection to HOST closed." for a session on a terminal, the daemon's
 * 's' line, nothing otherwise, and 255), before it as the Go shim. */
static void gone(void)
{
	if (!accepted)
		lost("connection to the bridge daemon lost");
	if (signal_line)
		(void)write_all(2, signal_line, signal_line_n);
	exit(EXIT_SSH_ERROR);
}

/* Frames to the daemon wait here until the socket takes them: the loop
 * keeps reading the daemon's frames meanwhile, as the Go shim's reader
 * goroutine does, so a daemon that writes output and reads no stdin
 * cannot deadlock with it. */
static struct buf out;
static size_t out_off;

static void queue_frame(char type, const char *payload, size_t n)
{
	char h[HEADER_LEN] = {type, (char)(n >> 24), (char)(n >> 16), (char)(n >> 8), (char)n};
	put(&out, h, HEADER_LEN);
	put(&out, payload, n);
}

/* flush sends what is queued; it returns -1 when the daemon is gone or
 * stopped reading (the queue dropped: nothing in it can reach it), else
 * 0 (with what did not fit still queued unless wait is set). */
static int flush(int wait)
{
	while (out_off < out.n) {
		ssize_t w = send(conn, out.p + out_off, out.n - out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			if (!wait)
				return 0;
			wait_fd(conn, POLLOUT);
			continue;
		}
		if (w < 0) {
			out.n = out_off = 0;
			return -1;
		}
		out_off += (size_t)w;
	}
	out.n = out_off = 0;
	return 0;
}

static int send_frame(char type, const char *payload, size_t n)
{
	queue_frame(type, payload, n);
	return flush(1);
}

static void read_full(char *p, size_t n)
{
	while (n > 0) {
		ssize_t r = recv(conn, p, n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			gone();
		p += r;
		n -= (size_t)r;
	}
}

/* peek_type is the next frame's type, left unread; 0 at the end. */
static char peek_type(void)
{
	char t;
	ssize_t r;
	while ((r = recv(conn, &t, 1, MSG_PEEK)) < 0 && errno == EINTR)
		;
	if (r < 0)
		gone();
	return r == 0 ? 0 : t;
}

/* read_frame consumes the next frame; its payload is malloc'd. */
static char *read_frame(size_t *n)
{
	unsigned char h[HEADER_LEN];
	read_full((char *)h, HEADER_LEN);
	uint32_t len = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
	if (len > MAX_PAYLOAD) {
		fprintf(stderr, "ansible-bridge: %s: wire: frame too large: %u bytes\r\n", g_prog, len);
		exit(EXIT_SSH_ERROR);
	}
	char *p = malloc(len ? len : 1);
	if (!p)
		lost("out of memory");
	read_full(p, len);
	*n = len;
	return p;
}

/* accept_raw: the Accept frame next asks for a raw terminal. */
static int accept_raw(void)
{
	char f[HEADER_LEN + 3];
	ssize_t r;
	while ((r = recv(conn, f, sizeof f, MSG_PEEK)) < 0 && errno == EINTR)
		;
	/* A payload under 3 bytes ("") comes with its header, in one write. */
	return r == sizeof f && memcmp(f + HEADER_LEN, "raw", 3) == 0;
}

/* ---------------------------------------------------------------- stdin */

static int is_pipe(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
}

static long long now_ms(void);

/* pipe_done is fakessh's pipeDone: it waits up to wait_ms for every
 * writer of the pipe on stdin to close it, without reading from it, and
 * reports whether they did, leaving at most limit bytes to read. */
static int pipe_done(int wait_ms, int limit)
{
	long long deadline = now_ms() + wait_ms;
	for (;;) {
		long long left = deadline - now_ms();
		struct pollfd p = {.fd = 0, .events = 0}; /* only a hangup or an error wakes it */
		int n = poll(&p, 1, left > 0 ? (int)left : 0);
		if (n < 0 && errno == EINTR)
			continue;
		int queued;
		return n > 0 && (p.revents & POLLHUP) && ioctl(0, FIONREAD, &queued) == 0 && queued <= limit;
	}
}

/* input_complete is fakessh's inputComplete: a pipe already closed by
 * its writers, holding at most STDIN_PIPE_SIZE bytes. */
static int input_complete(void)
{
	return is_pipe(0) && pipe_done(0, STDIN_PIPE_SIZE);
}

/* batch_on_stdin: sftp's argv may ask for "-b -". Any option word
 * holding a b followed by "-" counts: the Go shim parses it exactly, and
 * this only decides whether to wait for the batch's writer. */
static int batch_on_stdin(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0)
			break;
		const char *b = a[0] == '-' ? strchr(a + 1, 'b') : NULL;
		if (b && (b[1] ? strcmp(b + 1, "-") == 0 : i + 1 < argc && strcmp(argv[i + 1], "-") == 0))
			return 1;
	}
	return 0;
}

/* batch_unserved is fakessh's batchUnserved: sftp runs a batch on stdin
 * command by command as it reads it, and the bridge, which checks a
 * batch whole, serves one only once its writer closed it (within
 * BATCH_WAIT_MS for a pipe), and at most BATCH_MAX of it, which it can
 * hand back to the real sftp whole; a terminal or a socket may always
 * grow. Nothing is read. */
static int batch_unserved(void)
{
	struct stat st;
	if (fstat(0, &st) != 0)
		return 1;
	if (S_ISREG(st.st_mode)) {
		off_t at = lseek(0, 0, SEEK_CUR);
		return at < 0 || st.st_size - at > BATCH_MAX;
	}
	if (S_ISBLK(st.st_mode))
		return 1;
	if (S_ISCHR(st.st_mode))
		return isatty(0);
	return !S_ISFIFO(st.st_mode) || !pipe_done(BATCH_WAIT_MS, BATCH_MAX);
}

/* pump_once queues one read of stdin, and sends it too where wait is
 * set. It returns 0 at stdin's end (StdinEOF queued) or once the daemon
 * stops taking it (the Go shim's pump then stops too), else 1. */
static int pump_once(int wait)
{
	static char *chunk;
	if (!chunk && !(chunk = malloc(STDIN_CHUNK)))
		lost("out of memory");
	ssize_t n = read(0, chunk, STDIN_CHUNK);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 1;
	if (n > 0)
		queue_frame('i', chunk, (size_t)n);
	else
		queue_frame('I', NULL, 0);
	return flush(wait) == 0 && n > 0;
}

/* ---------------------------------------------------------------- signals */

static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
	int saved = errno;
	char c = (char)sig;
	(void)!write(sig_pipe[1], &c, 1);
	errno = saved;
}

/* watch_signals: from the hello on, a terminating signal is passed to
 * the daemon and ends the shim as the program it stands in for ends
 * (signalled). Caught even where the caller ignores it (Ansible's
 * workers ignore SIGINT), as ssh as a mux client catches it; but ssh's
 * mux client leaves SIGQUIT alone (mux.c), so ssh dies of it or ignores
 * it, and the daemon sees the shim go. */
static void watch_signals(void)
{
	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
		lost("cannot watch signals");
	struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
	sigemptyset(&sa.sa_mask);
	int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH};
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		if (sigs[i] == SIGQUIT && strcmp(g_prog, "ssh") == 0)
			continue;
		sigaction(sigs[i], &sa, NULL);
	}
}

static const char *signal_name(int sig)
{
	switch (sig) {
	case SIGINT: return "INT";
	case SIGTERM: return "TERM";
	case SIGHUP: return "HUP";
	default: return "QUIT";
	}
}

/* stop_deadline: after a signal scp and sftp die of, the daemon stops
 * the copy and sends the exit status; this is how long (CLOCK_MONOTONIC,
 * ms) the front waits for it. 0: no such signal yet. */
static long long stop_deadline;

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* signalled passes a window change on, as the Go shim does where stdin
 * is a terminal, and tells the daemon of any other signal: ssh ends at
 * once; scp and sftp wait for the daemon to stop the copy and give the
 * exit status (sftp's SIGINT may only abandon a command). */
static void signalled(int sig)
{
	if (sig == SIGWINCH) {
		struct winsize ws;
		if (stdin_tty && ioctl(0, TIOCGWINSZ, &ws) == 0) {
			char p[4] = {(char)(ws.ws_row >> 8), (char)ws.ws_row, (char)(ws.ws_col >> 8), (char)ws.ws_col};
			queue_frame('W', p, 4);
		}
		return;
	}
	const char *name = signal_name(sig);
	(void)send_frame('S', name, strlen(name));
	if (signal_line)
		(void)write_all(2, signal_line, signal_line_n);
	/* ssh exits 255; scp and sftp kill their ssh and exit 1 (the
	 * daemon's answer, or after a while without one), and die of SIGQUIT
	 * (forwardSignals in fakessh/shim.go). */
	if (strcmp(g_prog, "ssh") == 0)
		exit(EXIT_SSH_ERROR);
	if (sig == SIGQUIT) {
		signal(SIGQUIT, SIG_DFL);
		raise(SIGQUIT);
	}
	if (!stop_deadline && !(sig == SIGINT && strcmp(g_prog, "sftp") == 0))
		stop_deadline = now_ms() + STOP_WAIT_MS;
}

/* ---------------------------------------------------------------- master stub */

/* The daemon starts this program as the process of each ControlPersist
 * master it holds (bridge/masterstub.go), with STUB_ENV set, argv[0]
 * ssh's process title ("ssh: PATH [mux]") and its socket to the daemon
 * on STUB_FD: its pid is the one `ssh -O check` names. It waits on the
 * socket and exits when the daemon closes it; killed, it dies of the
 * signal, and the daemon ends the master as ssh's would on that signal.
 * SIGWINCH, which a mux client relays to its master, goes to the daemon
 * as a byte. */
static void stub_winch(int sig)
{
	(void)sig;
	int e = errno;
	if (write(STUB_FD, "W", 1) < 0) {
		/* the daemon is gone: the read below ends this */
	}
	errno = e;
}

static int master_stub(void)
{
	(void)prctl(PR_SET_NAME, "ssh", 0, 0, 0); /* ssh's comm */
	struct rlimit none = {0, 0};
	(void)setrlimit(RLIMIT_CORE, &none); /* ssh catches SIGQUIT: no core */
	sigset_t empty;
	sigemptyset(&empty);
	sigprocmask(SIG_SETMASK, &empty, NULL);
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	const int fatal[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM};
	for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
		sigaction(fatal[i], &dfl, NULL);
	struct sigaction ign = {.sa_handler = SIG_IGN};
	sigaction(SIGPIPE, &ign, NULL);
	struct sigaction winch = {.sa_handler = stub_winch, .sa_flags = SA_RESTART};
	sigaction(SIGWINCH, &winch, NULL);
	char b[64];
	for (;;) {
		ssize_t n = read(STUB_FD, b, sizeof b);
		if (n == 0 || (n < 0 && errno != EINTR))
			_exit(0);
	}
}

/* ---------------------------------------------------------------- main */

static int shim_name(const char *p)
{
	return strcmp(p, "ssh") == 0 || strcmp(p, "scp") == 0 || strcmp(p, "sftp") == 0;
}

/* sanitise_stdfd opens /dev/null on whichever of fds 0, 1 and 2 is
 * closed, as ssh, scp and sftp do first thing (misc.c): else the
 * daemon's socket could become stdin. */
static void sanitise_stdfd(void)
{
	int null = -1;
	for (int fd = 0; fd <= 2; fd++) {
		if (fcntl(fd, F_GETFL) != -1 || errno != EBADF)
			continue;
		if (null < 0 && (null = open("/dev/null", O_RDWR)) < 0)
			_exit(EXIT_SSH_ERROR);
		if (null != fd && dup2(null, fd) < 0)
			_exit(EXIT_SSH_ERROR);
	}
	if (null > 2)
		close(null);
}

/* close_inherited closes every descriptor above stderr, as ssh does
 * first thing (closefrom in ssh.c): a pipe or terminal the caller leaked
 * stays open no longer than the caller's own processes hold it, not
 * while this ssh, or a daemon or master it starts, runs on. scp and sftp
 * keep theirs, as OpenSSH's do. */
static void close_inherited(void)
{
#ifdef SYS_close_range
	if (syscall(SYS_close_range, 3U, ~0U, 0U) == 0)
		return;
#endif
	DIR *d = opendir("/proc/self/fd");
	if (d) {
		int own = dirfd(d);
		struct dirent *e;
		while ((e = readdir(d)) != NULL) {
			int fd = atoi(e->d_name);
			if (fd > 2 && fd != own)
				close(fd);
		}
		closedir(d);
		return;
	}
	struct rlimit rl;
	long max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 65536 ? (long)rl.rlim_cur : 65536;
	for (long fd = 3; fd < max; fd++)
		close((int)fd);
}

/* in_background: stdin, stdout or stderr is the controlling terminal,
 * and this process is not in its foreground group (`ssh host cmd &`):
 * the Go shim hands ssh to the real one, whose master does the I/O, where
 * this program would be stopped (fakessh's background). */
static int in_background(void)
{
	pid_t pgrp = getpgrp();
	for (int fd = 0; fd <= 2; fd++) {
		pid_t fg = tcgetpgrp(fd);
		if (fg != -1 && fg != pgrp)
			return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (getenv(STUB_ENV))
		return master_stub();
	sanitise_stdfd();
	g_argv = argv;
	const char *base = argc > 0 ? strrchr(argv[0], '/') : NULL;
	g_prog = base ? base + 1 : argc > 0 ? argv[0] : "ssh";
	if (strcmp(g_prog, "ssh") == 0)
		close_inherited();
	/* ssh ignores SIGPIPE: a closed stdout is an error it handles. */
	struct sigaction ign = {.sa_handler = SIG_IGN};
	sigaction(SIGPIPE, strcmp(g_prog, "ssh") == 0 ? &ign : NULL, &caller_sigpipe);
	struct sigaction quit;
	quit_ignored = sigaction(SIGQUIT, NULL, &quit) == 0 && quit.sa_handler == SIG_IGN;
	term_ignored = sigaction(SIGTERM, NULL, &quit) == 0 && quit.sa_handler == SIG_IGN;
	unsetenv(IGNORED_ENV);
	unsetenv(RESUME_ENV); /* only this program sets it, for the Go shim */
	unsetenv(BATCH_OPEN_ENV);
	if (argc < 1 || !shim_name(g_prog) || getenv("ANSIBLE_BRIDGE_ARGV0") || getenv("ANSIBLE_BRIDGE_DISABLE"))
		handover(NULL);
	/* A terminal: Ansible gives ssh a pty's slave for stdin when it may
	 * have to answer a prompt. The controlling terminal, a user's, may
	 * mean an interactive session: the Go shim decides that. */
	pid_t sid;
	stdin_tty = isatty(0);
	if (stdin_tty && ioctl(0, TIOCGSID, &sid) == 0)
		handover(NULL);
	if (strcmp(g_prog, "ssh") == 0 && in_background())
		handover(NULL);
	if (is_pipe(0))
		(void)fcntl(0, F_SETPIPE_SZ, STDIN_PIPE_SIZE);
	if (strcmp(g_prog, "sftp") == 0 && batch_on_stdin(argc, argv) && batch_unserved()) {
		setenv(BATCH_OPEN_ENV, "1", 1);
		handover(NULL);
	}

	for (int i = 0; i < argc; i++)
		if (!utf8(argv[i]))
			handover(NULL);
	for (char **e = environ; *e; e++)
		if (!utf8(*e))
			handover(NULL);
	char sock[PATH_MAX], dir[PATH_MAX];
	if (getcwd(dir, sizeof dir) != NULL && !utf8(dir))
		handover(NULL);
	if (socket_path(sock, sizeof sock) != 0 || private_dir(sock) != 0 || (conn = dial(sock)) < 0)
		handover(NULL);
	struct buf b = {0};
	hello(&b, argc, argv);
	if (b.n > MAX_PAYLOAD)
		handover(NULL);
	if (send_frame('H', b.p, b.n) != 0) {
		fprintf(stderr, "ansible-bridge: %s: send hello: %s\r\n", g_prog, strerror(errno));
		exit(EXIT_SSH_ERROR);
	}
	free(b.p);
	/* ssh leaves signals as it found them until its session starts (a
	 * mux client's handlers come with the session): killed while it logs
	 * in, it dies of the signal, and the daemon, seeing it go, abandons
	 * the login. */
	if (strcmp(g_prog, "ssh") != 0)
		watch_signals();

	enum { HELLO, ACCEPTED, STDIN_DONE } state = HELLO;
	int stdout_failed = 0;
	for (;;) {
		int queued = out_off < out.n;
		struct pollfd p[3] = {{.fd = conn, .events = POLLIN | (queued ? POLLOUT : 0)},
				      {.fd = sig_pipe[0], .events = POLLIN},
				      {.fd = state == ACCEPTED && !queued ? 0 : -1, .events = POLLIN}};
		int timeout = -1;
		if (stop_deadline) {
			long long left = stop_deadline - now_ms();
			if (left <= 0)
				exit(1);
			timeout = (int)left;
		}
		if (poll(p, 3, timeout) < 0) {
			if (errno == EINTR)
				continue;
			lost("poll failed");
		}
		char sig;
		if (p[1].revents && read(sig_pipe[0], &sig, 1) == 1)
			signalled(sig);
		if (p[2].revents && !pump_once(0))
			state = STDIN_DONE;
		if ((p[0].revents & POLLOUT) && flush(0) != 0)
			state = STDIN_DONE; /* the daemon stopped reading: its frames tell the rest */
		if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		char type = peek_type();
		size_t n;
		char *payload;
		switch (type) {
		case 0:
			gone();
			break;
		case 'o':
			payload = read_frame(&n);
			if (!stdout_failed && write_all(1, payload, n) != 0) {
				if (strcmp(g_prog, "ssh") != 0) {
					fprintf(stderr, "ansible-bridge: %s: write stdout: %s\r\n", g_prog, strerror(errno));
					exit(EXIT_SSH_ERROR);
				}
				/* ssh's chan_write_failed: silent; the rest is
				 * dropped, and the daemon tells the server. */
				stdout_failed = 1;
				queue_frame('O', NULL, 0);
			}
			free(payload);
			break;
		case 'e':
			payload = read_frame(&n);
			(void)write_all(2, payload, n);
			free(payload);
			break;
		case 's':
			free(signal_line);
			signal_line = read_frame(&signal_line_n);
			break;
		case 'X': {
			payload = read_frame(&n);
			if (n != 4) {
				fprintf(stderr, "ansible-bridge: %s: wire: exit payload of %zu bytes\r\n", g_prog, n);
				exit(EXIT_SSH_ERROR);
			}
			unsigned char *u = (unsigned char *)payload;
			exit((int)((uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 | u[3]));
		}
		case 'E':
			/* ssh's chan_rcvd_eow: stdin is read no more, and stays
			 * open (a writer blocks, and gets EPIPE once ssh exits). */
			free(read_frame(&n));
			if (state == ACCEPTED)
				state = STDIN_DONE;
			break;
		case 'G': /* the daemon leaves this one to the Go shim */
			handover(NULL);
			break;
		case 'A':
			/* A raw terminal is the Go shim's to set and restore. */
			if (state != HELLO || (stdin_tty && accept_raw()))
				goto resume;
			free(read_frame(&n));
			if (input_complete()) {
				/* Reads cannot block: the input goes at once, in
				 * line, as the Go shim sends it. */
				while (pump_once(1))
					;
				state = STDIN_DONE;
			} else
				state = ACCEPTED;
			if (!accepted && strcmp(g_prog, "ssh") == 0)
				watch_signals();
			accepted = 1;
			break;
		default:
		resume: {
			/* The Go shim takes the conversation on from here,
			 * after what this program has queued. */
			(void)flush(1);
			char resume[64];
			static const char *names[] = {"hello", "accepted", "eof"};
			int fl = fcntl(conn, F_GETFD);
			if (fl < 0 || fcntl(conn, F_SETFD, fl & ~FD_CLOEXEC) < 0)
				lost("cannot hand the connection over");
			snprintf(resume, sizeof resume, "%d %s", conn, names[state]);
			handover(resume);
		}
		}
	}
}
