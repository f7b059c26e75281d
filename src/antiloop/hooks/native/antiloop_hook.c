/*
 * antiloop-hook: the native hook client (see __init__.py beside this file).
 *
 *     antiloop-hook AGENT [--config FILE] [--fail open|closed]   < event.json
 *
 * Hands the event on stdin to this installation's hook daemon over its Unix socket and prints
 * the answer, as antiloop/_hook_client.py does, at the cost of a small process. Whenever that
 * cannot be done (no daemon, a daemon silent for ANTILOOP_HOOKD_WAIT seconds, a stale one), it
 * runs the Python client beside it, `antiloop hook AGENT ...`, with the same event on stdin:
 * that one judges the event in its own process and starts a daemon. A daemon that took the
 * event and gave no answer is first taken out of the way (its socket removed, the process
 * ended), and the reason is handed on in ANTILOOP_HOOKD_PROBLEM.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define PROTOCOL "antiloop-hookd/1"
#define SOCKET_MAX 100
#define DEFAULT_WAIT 2.0
#define LONGEST 25.0

typedef struct {
    char *data;
    size_t len, cap;
} buffer;

static char self_dir[PATH_MAX];
static char **client_args; /* AGENT and its options, as given */
static int client_count;

static void add(buffer *b, const void *bytes, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1) cap *= 2;
        char *grown = realloc(b->data, cap);
        if (grown == NULL) {
            fputs("antiloop-hook: out of memory\n", stderr);
            exit(0);
        }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, bytes, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void add_str(buffer *b, const char *text) { add(b, text, strlen(text)); }

static void add_field(buffer *b, const char *bytes, size_t n) {
    char head[32];
    snprintf(head, sizeof head, "%zu:", n);
    add_str(b, head);
    add(b, bytes, n);
}

static int read_fd(int fd, buffer *b) {
    char chunk[65536];
    for (;;) {
        ssize_t got = read(fd, chunk, sizeof chunk);
        if (got == 0) return 0;
        if (got < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        add(b, chunk, (size_t)got);
    }
}

static int write_all(int fd, const char *bytes, size_t n) {
    while (n > 0) {
        ssize_t put = write(fd, bytes, n);
        if (put < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        bytes += put;
        n -= (size_t)put;
    }
    return 0;
}

static int is_off(const char *value) {
    char word[8];
    size_t n = 0;
    if (value == NULL) return 0;
    while (isspace((unsigned char)*value)) value++;
    while (*value && !isspace((unsigned char)*value) && n < sizeof word - 1)
        word[n++] = (char)tolower((unsigned char)*value++);
    word[n] = '\0';
    return !strcmp(word, "0") || !strcmp(word, "off") || !strcmp(word, "no") ||
           !strcmp(word, "false");
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double wait_seconds(void) {
    const char *raw = getenv("ANTILOOP_HOOKD_WAIT");
    if (raw && *raw) {
        char *end;
        double value = strtod(raw, &end);
        if (end != raw) return value < 0.05 ? 0.05 : value > 60 ? 60 : value;
    }
    return DEFAULT_WAIT;
}

static const char *home(void) {
    const char *found = getenv("HOME");
    if (found && *found) return found;
    struct passwd *user = getpwuid(getuid());
    return user ? user->pw_dir : "/";
}

/* FNV-1a, 32 bits: antiloop._hook_client._tag */
static uint32_t fnv(const char *bytes, size_t n) {
    uint32_t value = 0x811C9DC5u;
    for (size_t i = 0; i < n; i++) value = (value ^ (unsigned char)bytes[i]) * 0x01000193u;
    return value;
}

/* Run `antiloop hook AGENT ...` beside this program with `data` on stdin; never returns. */
static void fallback(const buffer *data, const char *problem) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/antiloop", self_dir);
    if (data != NULL) {
        FILE *held = tmpfile();
        if (held == NULL || (data->len && fwrite(data->data, 1, data->len, held) != data->len) ||
            fflush(held) != 0 || fseek(held, 0, SEEK_SET) != 0 || dup2(fileno(held), 0) < 0) {
            problem = problem ? problem : "the event could not be handed on";
        }
    }
    if (problem) setenv("ANTILOOP_HOOKD_PROBLEM", problem, 1);
    char **argv = calloc((size_t)client_count + 3, sizeof *argv);
    if (argv != NULL) {
        argv[0] = path;
        argv[1] = "hook";
        for (int i = 0; i < client_count; i++) argv[i + 2] = client_args[i];
        execv(path, argv);
    }
    /* No Python client: say so, and let the call go on unless the user chose fail-closed. */
    const char *fail = getenv("ANTILOOP_FAIL");
    int closed = fail && !strcmp(fail, "closed");
    fprintf(stderr, "antiloop-hook: cannot run %s (%s)\n", path, strerror(errno));
    if (closed) {
        fputs("antiloop-hook: ANTILOOP_FAIL=closed: blocking.\n", stderr);
        exit(2);
    }
    printf("{\"systemMessage\": \"antiloop: cannot run the hook client beside antiloop-hook; "
           "nothing was checked (reinstall antiloop)\"}\n");
    exit(0);
}

/* Take a daemon that failed an event out of the way: _hook_client.retire. */
static void retire(const char *path, ino_t inode, pid_t pid) {
    struct stat info;
    if (stat(path, &info) == 0 && info.st_ino == inode) unlink(path);
    if (pid <= 0 || pid == getpid()) return;
    char name[64];
    snprintf(name, sizeof name, "/proc/%d/cmdline", (int)pid);
    FILE *f = fopen(name, "rb");
    if (f == NULL) return;
    char line[8192];
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    int ours = 0;
    for (size_t at = 0; at < n; at += strlen(line + at) + 1)
        if (!strcmp(line + at, "antiloop.hooks.daemon")) ours = 1;
    snprintf(name, sizeof name, "/proc/%d", (int)pid);
    if (ours && stat(name, &info) == 0 && info.st_uid == getuid()) kill(pid, SIGKILL);
}

static pid_t peer(int fd) {
#ifdef SO_PEERCRED
    struct ucred cred;
    socklen_t size = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &size) == 0) return cred.pid;
#else
    (void)fd;
#endif
    return 0;
}

static int wait_for(int fd, short events, double deadline) {
    for (;;) {
        double left = deadline - now();
        if (left <= 0) return 0;
        struct pollfd p = {fd, events, 0};
        int ready = poll(&p, 1, (int)(left * 1000) + 1);
        if (ready > 0) return 1;
        if (ready < 0 && errno != EINTR) return -1;
    }
}

static void set_self_dir(const char *argv0) {
    char found[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", found, sizeof found - 1);
    if (n > 0) {
        found[n] = '\0';
    } else if (realpath(argv0, found) == NULL) {
        snprintf(found, sizeof found, "%s", argv0);
    }
    char *slash = strrchr(found, '/');
    if (slash == found) slash[1] = '\0';
    else if (slash) *slash = '\0';
    else snprintf(found, sizeof found, ".");
    snprintf(self_dir, sizeof self_dir, "%s", found);
}

static void expand(char *out, size_t size, const char *path, const char *cwd) {
    if (path[0] == '~' && (path[1] == '/' || path[1] == '\0'))
        snprintf(out, size, "%s%s", home(), path + 1);
    else if (path[0] == '/')
        snprintf(out, size, "%s", path);
    else
        snprintf(out, size, "%s/%s", cwd, path);
}

int main(int argc, char **argv) {
    set_self_dir(argv[0]);
    client_args = argv + 1;
    client_count = argc - 1;
    if (argc < 2 || argv[1][0] == '-') fallback(NULL, NULL); /* usage: the Python client's */
    const char *config = NULL;
    for (int i = 2; i < argc; i++) {
        const char *word = argv[i], *value = NULL;
        size_t name = strcspn(word, "=");
        int fail = name == 6 && !strncmp(word, "--fail", 6);
        if (!(name == 8 && !strncmp(word, "--config", 8)) && !fail) fallback(NULL, NULL);
        if (word[name] == '=') value = word + name + 1;
        else if (i + 1 < argc) value = argv[++i];
        if (value == NULL || !*value) fallback(NULL, NULL);
        if (fail) {
            if (strcmp(value, "open") && strcmp(value, "closed")) fallback(NULL, NULL);
            setenv("ANTILOOP_FAIL", value, 1);
        } else {
            config = value;
        }
    }

    buffer data = {0};
    add(&data, "", 0);
    if (!isatty(0) && read_fd(0, &data) < 0) data.len = 0;
    if (is_off(getenv("ANTILOOP_HOOKD"))) fallback(&data, NULL);

    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd) == NULL) {
        const char *pwd = getenv("PWD");
        snprintf(cwd, sizeof cwd, "%s", pwd && *pwd ? pwd : "/");
    }
    char dir[PATH_MAX], path[PATH_MAX + 32];
    const char *named = getenv("ANTILOOP_HOOKD_DIR");
    if (named && *named) expand(dir, sizeof dir, named, cwd);
    else snprintf(dir, sizeof dir, "%s/.antiloop/run", home());
    buffer key = {0};
    add_str(&key, self_dir);
    add(&key, "", 1);
    const char *pythonpath = getenv("PYTHONPATH");
    if (pythonpath) add_str(&key, pythonpath);
    snprintf(path, sizeof path, "%s/hookd-%08x.sock", dir, fnv(key.data, key.len));
    struct stat info;
    if (strlen(path) > SOCKET_MAX || stat(dir, &info) != 0 || info.st_uid != getuid() ||
        (info.st_mode & 077))
        fallback(&data, NULL);
    if (stat(path, &info) != 0) fallback(&data, NULL);
    ino_t inode = info.st_ino;

    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un address = {0};
    address.sun_family = AF_UNIX;
    snprintf(address.sun_path, sizeof address.sun_path, "%s", path);
    if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof address) != 0)
        fallback(&data, NULL);

    char config_path[PATH_MAX * 2];
    config_path[0] = '\0';
    if (config) expand(config_path, sizeof config_path, config, cwd);
    int fields = 4;
    for (char **e = environ; *e; e++) fields++;
    buffer request = {0};
    char count[32];
    snprintf(count, sizeof count, "%d\n", fields);
    add_str(&request, count);
    add_field(&request, PROTOCOL, strlen(PROTOCOL));
    add_field(&request, client_args[0], strlen(client_args[0]));
    add_field(&request, config_path, strlen(config_path));
    add_field(&request, cwd, strlen(cwd));
    for (char **e = environ; *e; e++) add_field(&request, *e, strlen(*e));
    add(&request, data.data, data.len);

    /* `wait` seconds of silence (the daemon sends '.' every half second while it works),
       LONGEST in all */
    double wait = wait_seconds(), deadline = now() + wait, give_up = now() + LONGEST;
    char problem[160] = "";
    size_t sent = 0;
    while (sent < request.len && !problem[0]) {
        int ready = wait_for(fd, POLLOUT, deadline);
        if (ready <= 0) break;
        ssize_t put = send(fd, request.data + sent, request.len - sent, MSG_NOSIGNAL);
        if (put < 0 && errno != EINTR && errno != EAGAIN)
            snprintf(problem, sizeof problem, "the hook daemon's connection failed (%s)",
                     strerror(errno));
        else if (put > 0) sent += (size_t)put;
    }
    buffer reply = {0};
    add(&reply, "", 0);
    int done = 0;
    if (sent == request.len && !problem[0]) {
        shutdown(fd, SHUT_WR);
        char chunk[65536];
        while (!done && !problem[0]) {
            double t = now() + wait;
            deadline = t < give_up ? t : give_up;
            int ready = wait_for(fd, POLLIN, deadline);
            if (ready <= 0) break;
            ssize_t got = recv(fd, chunk, sizeof chunk, 0);
            if (got == 0) done = 1;
            else if (got > 0) add(&reply, chunk, (size_t)got);
            else if (errno != EINTR && errno != EAGAIN)
                snprintf(problem, sizeof problem, "the hook daemon's connection failed (%s)",
                         strerror(errno));
        }
    }
    if (!problem[0] && !done)
        snprintf(problem, sizeof problem, "the hook daemon gave no answer within %g s", wait);
    if (!problem[0] && reply.len == 0)
        snprintf(problem, sizeof problem, "the hook daemon closed the connection without an answer");
    if (problem[0]) {
        retire(path, inode, peer(fd));
        close(fd);
        fallback(&data, problem);
    }
    close(fd);

    /* '.'s (signs of life), then "ok CODE OUT ERR\n" OUT-bytes ERR-bytes, else "stale" (not
       judged) or garbage */
    size_t alive = 0;
    while (alive < reply.len && reply.data[alive] == '.') alive++;
    memmove(reply.data, reply.data + alive, reply.len - alive + 1);
    reply.len -= alive;
    char *newline = memchr(reply.data, '\n', reply.len);
    int code;
    size_t out, err;
    char tail;
    if (newline && sscanf(reply.data, "ok %d %zu %zu%c", &code, &out, &err, &tail) == 4 &&
        tail == '\n' && (size_t)(newline - reply.data) + 1 + out + err == reply.len) {
        const char *body = newline + 1;
        write_all(1, body, out);
        write_all(2, body + out, err);
        return code;
    }
    if (reply.len >= 5 && !memcmp(reply.data, "stale", 5)) fallback(&data, NULL);
    retire(path, inode, 0);
    fallback(&data, "the hook daemon's answer could not be read");
    return 0;
}
