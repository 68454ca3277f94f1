/*
 * landlock_exec: apply a Landlock ruleset, then exec a command (charter.sandbox).
 *
 * charter runs it inside bubblewrap, just before the shell, so the kernel enforces the
 * policy's path and network rules a second time, independently of the mounts:
 *
 *   landlock_exec [-r PATH]... [-w PATH]... [-n [-c PORT]...] [-u] [-b PORT:SOCKET]
 *                 [-x HEX] -- PROGRAM [ARG]...
 *
 *   -r PATH         PATH and everything beneath may be read, listed and executed
 *   -w PATH         PATH and everything beneath may be written, created, removed
 *                   (give -r too for a root that is also readable)
 *   -n              no TCP: connect() and bind() are refused (Landlock ABI >= 4)
 *   -c PORT         with -n: connect() to this TCP port stays allowed (the proxy bridge)
 *   -u              no abstract unix sockets or signals outside the sandbox (ABI >= 6)
 *   -b PORT:SOCKET  listen on 127.0.0.1:PORT before anything else and relay every
 *                   connection to the unix socket SOCKET (charter's network proxy), in a
 *                   child that is forked before the ruleset applies and dies with PROGRAM
 *   -x HEX          install this seccomp filter (classic BPF, native sock_filter structs
 *                   in hex: charter.sandbox.seccomp builds it) last, after the bridge is
 *                   forked and the ruleset applied, so the bridge keeps its unix socket
 *
 * Filesystem rules apply when any -r or -w is given: everything not granted is refused
 * (EACCES). Every requested restriction is applied or the command does not run (exit
 * 125 with a message naming the missing piece): charter checks the kernel's Landlock ABI
 * before asking, so a refusal here is a broken promise, never a silent downgrade.
 *
 * No libc Landlock wrappers and no <linux/landlock.h>: the syscalls and structures are
 * declared below, so the helper builds against any kernel headers.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#define SYS_ll_create_ruleset 444 /* the same number on every architecture */
#define SYS_ll_add_rule 445
#define SYS_ll_restrict_self 446
#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1
#define LL_RULE_NET_PORT 2

#define FS_EXECUTE (1ULL << 0)
#define FS_WRITE_FILE (1ULL << 1)
#define FS_READ_FILE (1ULL << 2)
#define FS_READ_DIR (1ULL << 3)
#define FS_REMOVE_DIR (1ULL << 4)
#define FS_REMOVE_FILE (1ULL << 5)
#define FS_MAKE_CHAR (1ULL << 6)
#define FS_MAKE_DIR (1ULL << 7)
#define FS_MAKE_REG (1ULL << 8)
#define FS_MAKE_SOCK (1ULL << 9)
#define FS_MAKE_FIFO (1ULL << 10)
#define FS_MAKE_BLOCK (1ULL << 11)
#define FS_MAKE_SYM (1ULL << 12)
#define FS_REFER (1ULL << 13)    /* ABI 2 */
#define FS_TRUNCATE (1ULL << 14) /* ABI 3 */
#define FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#define NET_BIND_TCP (1ULL << 0)    /* ABI 4 */
#define NET_CONNECT_TCP (1ULL << 1) /* ABI 4 */
#define SCOPE_ABSTRACT_UNIX (1ULL << 0) /* ABI 6 */
#define SCOPE_SIGNAL (1ULL << 1)        /* ABI 6 */

#define FS_READ (FS_EXECUTE | FS_READ_FILE | FS_READ_DIR)
#define FS_WRITE                                                                       \
    (FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_CHAR | FS_MAKE_DIR |     \
     FS_MAKE_REG | FS_MAKE_SOCK | FS_MAKE_FIFO | FS_MAKE_BLOCK | FS_MAKE_SYM |          \
     FS_REFER | FS_TRUNCATE | FS_IOCTL_DEV)
/* Rights that mean something on a file (not a directory): the kernel refuses others. */
#define FS_FILE_RIGHTS (FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV)

struct ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

struct path_beneath_attr {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));

struct net_port_attr {
    uint64_t allowed_access;
    uint64_t port;
};

#define MAX_ITEMS 4096
#define EXIT_REFUSED 125

static const char *progname = "landlock_exec";

static void die(const char *what, const char *detail) {
    fprintf(stderr, "%s: %s%s%s\n", progname, what, detail ? ": " : "", detail ? detail : "");
    exit(EXIT_REFUSED);
}

static void usage(void) {
    die("usage",
        "landlock_exec [-r PATH]... [-w PATH]... [-n [-c PORT]...] [-u] [-b PORT:SOCKET] "
        "[-x HEX] -- PROGRAM [ARG]...");
}

static uint64_t fs_rights_for_abi(int abi) {
    uint64_t all = FS_READ | FS_WRITE;
    if (abi < 2) all &= ~FS_REFER;
    if (abi < 3) all &= ~FS_TRUNCATE;
    if (abi < 5) all &= ~FS_IOCTL_DEV;
    return all;
}

static long parse_port(const char *text) {
    char *end = NULL;
    long port = strtol(text, &end, 10);
    if (!*text || *end || port < 1 || port > 65535) die("bad port", text);
    return port;
}

/* ---- the proxy bridge: 127.0.0.1:PORT -> unix SOCKET, one child per connection ---- */

static void die_with_parent(pid_t parent) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(0); /* the parent is already gone */
}

static int pump(int from, int to) {
    char buf[65536];
    ssize_t n = read(from, buf, sizeof buf);
    if (n <= 0) return 0;
    for (ssize_t off = 0; off < n;) {
        ssize_t w = write(to, buf + off, (size_t)(n - off));
        if (w < 0) {
            if (errno == EINTR) continue;
            return 0;
        }
        off += w;
    }
    return 1;
}

static void relay(int client, const char *path) {
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    int up = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    strncpy(addr.sun_path, path, sizeof addr.sun_path - 1);
    if (up < 0 || connect(up, (struct sockaddr *)&addr, sizeof addr) < 0) return;
    struct pollfd fds[2] = {{.fd = client, .events = POLLIN}, {.fd = up, .events = POLLIN}};
    int open_ends = 2;
    while (open_ends > 0) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            return;
        }
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            int other = i ? client : up; /* still writable after its own EOF */
            if (!pump(fds[i].fd, other)) {
                shutdown(other, SHUT_WR); /* half-close: the other way may still flow */
                fds[i].fd = -1;
                open_ends--;
            }
        }
    }
}

static void start_bridge(const char *spec) {
    const char *colon = strchr(spec, ':');
    if (!colon || !colon[1]) die("bad -b (want PORT:SOCKET)", spec);
    char port_text[8];
    size_t len = (size_t)(colon - spec);
    if (len == 0 || len >= sizeof port_text) die("bad -b port", spec);
    memcpy(port_text, spec, len);
    port_text[len] = 0;
    long port = parse_port(port_text);
    const char *path = colon + 1;
    if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) die("socket path too long", path);

    int srv = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (srv < 0 || setsockopt(srv, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(srv, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(srv, 64) < 0)
        die("cannot listen on the bridge port", strerror(errno));

    /* Listening before the fork and the exec: the command never races the bridge. */
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) die("fork", strerror(errno));
    if (pid > 0) {
        close(srv);
        return;
    }
    die_with_parent(parent);
    /* Nothing of the command's stdio stays open here (its reader waits for EOF). */
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
    }
    signal(SIGCHLD, SIG_IGN); /* connection children are reaped by the kernel */
    signal(SIGPIPE, SIG_IGN); /* a peer gone mid-write ends that relay, not by a signal */
    pid_t server = getpid();
    for (;;) {
        int client = accept4(srv, NULL, NULL, SOCK_CLOEXEC);
        if (client < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            _exit(1);
        }
        pid_t child = fork();
        if (child == 0) {
            die_with_parent(server);
            close(srv);
            relay(client, path);
            _exit(0);
        }
        close(client);
    }
}

/* ---- the seccomp filter ---- */

struct bpf_insn {
    uint16_t code;
    uint8_t jt;
    uint8_t jf;
    uint32_t k;
};

struct bpf_prog {
    unsigned short len;
    struct bpf_insn *filter;
};

#define SECCOMP_SET_MODE_FILTER_ 1
#define SECCOMP_FILTER_FLAG_SPEC_ALLOW_ (1UL << 2) /* Linux 4.17 */
#define MAX_INSNS 512

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void apply_filter(const char *hex) {
    static struct bpf_insn insns[MAX_INSNS];
    size_t n = strlen(hex);
    if (n == 0 || n % (2 * sizeof(struct bpf_insn)) || n / 2 > sizeof insns) die("bad -x filter", NULL);
    unsigned char *bytes = (unsigned char *)insns;
    for (size_t i = 0; i < n; i += 2) {
        int hi = hexval(hex[i]), lo = hexval(hex[i + 1]);
        if (hi < 0 || lo < 0) die("bad -x filter", "not hex");
        bytes[i / 2] = (unsigned char)(hi << 4 | lo);
    }
    struct bpf_prog prog = {.len = (unsigned short)(n / 2 / sizeof(struct bpf_insn)), .filter = insns};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) die("no_new_privs", strerror(errno));
    /* SPEC_ALLOW: the filter confines what the process reaches, not what it speculates
     * about its own memory; without it the kernel turns on speculative-store-bypass and
     * indirect-branch mitigations for the task, which cost milliseconds per exec. */
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER_, SECCOMP_FILTER_FLAG_SPEC_ALLOW_, &prog) < 0 &&
        (errno != EINVAL || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER_, 0, &prog) < 0))
        die("seccomp filter refused", strerror(errno));
}

/* ---- the Landlock ruleset ---- */

static void add_path(int ruleset, const char *path, uint64_t access, uint64_t handled) {
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR || errno == EACCES) return; /* nothing to grant */
        die("cannot open a root", path);
    }
    struct stat st;
    if (fstat(fd, &st) < 0) die("cannot stat a root", path);
    struct path_beneath_attr attr = {.allowed_access = access & handled, .parent_fd = fd};
    if (!S_ISDIR(st.st_mode)) attr.allowed_access &= FS_FILE_RIGHTS;
    if (attr.allowed_access &&
        syscall(SYS_ll_add_rule, ruleset, LL_RULE_PATH_BENEATH, &attr, 0) < 0)
        die("landlock_add_rule (path)", path);
    close(fd);
}

int main(int argc, char **argv) {
    const char *reads[MAX_ITEMS], *writes[MAX_ITEMS];
    long ports[64];
    int nreads = 0, nwrites = 0, nports = 0, no_tcp = 0, scope = 0;
    const char *bridge = NULL, *filter = NULL;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (a[0] != '-' || !a[1] || a[2]) usage();
        switch (a[1]) {
        case 'n': no_tcp = 1; continue;
        case 'u': scope = 1; continue;
        }
        if (i + 1 >= argc) usage();
        const char *value = argv[++i];
        switch (a[1]) {
        case 'r':
            if (nreads == MAX_ITEMS) die("too many -r", NULL);
            reads[nreads++] = value;
            break;
        case 'w':
            if (nwrites == MAX_ITEMS) die("too many -w", NULL);
            writes[nwrites++] = value;
            break;
        case 'c':
            if (nports == 64) die("too many -c", NULL);
            ports[nports++] = parse_port(value);
            break;
        case 'b': bridge = value; break;
        case 'x': filter = value; break;
        default: usage();
        }
    }
    if (i >= argc) usage();
    if (nports && !no_tcp) die("-c needs -n", NULL);

    if (bridge) start_bridge(bridge);

    int fs = nreads || nwrites;
    if (fs || no_tcp || scope) {
        int abi = (int)syscall(SYS_ll_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
        if (abi < 1) die("Landlock is not available in this kernel", strerror(errno));
        if (no_tcp && abi < 4) die("TCP rules need Landlock ABI 4", NULL);
        if (scope && abi < 6) die("scopes need Landlock ABI 6", NULL);
        struct ruleset_attr attr = {0};
        if (fs) attr.handled_access_fs = fs_rights_for_abi(abi);
        if (no_tcp) attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP;
        if (scope) attr.scoped = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL;
        /* Older kernels reject a larger struct only when its extra fields are non-zero. */
        size_t size = scope ? sizeof attr : no_tcp ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
        int ruleset = (int)syscall(SYS_ll_create_ruleset, &attr, size, 0);
        if (ruleset < 0) die("landlock_create_ruleset", strerror(errno));
        for (int k = 0; k < nreads; k++) add_path(ruleset, reads[k], FS_READ, attr.handled_access_fs);
        for (int k = 0; k < nwrites; k++) add_path(ruleset, writes[k], FS_WRITE, attr.handled_access_fs);
        for (int k = 0; k < nports; k++) {
            struct net_port_attr net = {.allowed_access = NET_CONNECT_TCP, .port = (uint64_t)ports[k]};
            if (syscall(SYS_ll_add_rule, ruleset, LL_RULE_NET_PORT, &net, 0) < 0)
                die("landlock_add_rule (port)", strerror(errno));
        }
        /* bubblewrap has set it already; run directly, the kernel requires it. */
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) die("no_new_privs", strerror(errno));
        if (syscall(SYS_ll_restrict_self, ruleset, 0) < 0)
            die("landlock_restrict_self", strerror(errno));
        close(ruleset);
    }
    if (filter) apply_filter(filter);
    execvp(argv[i], argv + i);
    fprintf(stderr, "%s: cannot run %s: %s\n", progname, argv[i], strerror(errno));
    return errno == ENOENT ? 127 : 126;
}
