/* ptrun.c - the supervisor: runs a training job under mpirun, notices a dead or hung rank, tears
   the job down and resumes it on what is left.

   Build: cc -O2 -Wall tools/ptrun.c -o build/ptrun   (make tools builds it; it includes tools/ptrun_line.h)

   Usage: ptrun [flags] -- TRAINER [ARGS...]
   e.g.   ptrun --hosts hosts.txt --max-restarts 5 -- build/pttrain --dp 2 --pp 2 --ckpt-dir ckpt --ckpt-every 10 --log run.jsonl

   What it does, in order (docs/fault-tolerance.md tells the whole story):
   1. Reads the hostfile (Open MPI's format: `HOST slots=N`, # comments), and the trainer's layout
      from its flags (--dp --tp --pp --accum --batch --micro-batches, --ckpt-dir, --log). A trainer
      command without --ckpt-dir is refused: a restart could only begin again at step 0.
   2. Listens on a TCP port of its own (127.0.0.1 when every host is this machine, else the interface
      that routes to the hostfile's hosts, or --listen ADDR) and launches `mpirun --hostfile H -np N
      -x VAR... TRAINER ...` with PTRAIN_SUPERVISOR=HOST:PORT, PTRAIN_SUPERVISOR_SECRET (128 random
      bits drawn for this run) and PTRAIN_SUPERVISOR_ID among the variables (forwarded by name: no
      value on a command line): every rank (ptrain.h's harness) connects back, says hello with the
      secret (a connection without it is closed and logged; every field of every line is checked,
      tools/ptrun_line.h), beats every 0.2 s with its step, steps done, phase (setup, step, ckpt, eval)
      and the last step's working time, and holds a lease (it exits by itself when ptrun goes quiet).
      The trainer's output passes through unchanged; ptrun's own lines begin `ptrun:` on stderr.
   3. Watches: a channel closing without a goodbye or the launcher exiting is a death (noticed at
      once); no progress for longer than the phase's timeout is a hang (set-up: --timeout setup=S,
      300 s; step, ckpt, eval: 5 x the longest seen so far, at least --timeout-floor S (30), or a
      fixed --timeout PHASE=S); a rank whose working time stays over 1.5 x the median for 3 steps is
      a straggler: logged, not killed.
   4. On a failure: tears the whole job down (abort to every rank, SIGTERM then SIGKILL to mpirun,
      SIGKILL to every rank's pid that is verifiably the job's: under its mpirun, or with this run's
      PTRAIN_SUPERVISOR_ID in its environment, checked on other hosts by a fixed command the remote
      shell runs, given as an argument vector, no local shell), re-reads the hostfile,
      probes each host through the launcher's remote shell (--agent; a host that does not answer in
      --probe-timeout s is left out this time and tried again at the next restart), keeps tp x pp,
      picks the largest DP (at most the first launch's) that fits the healthy slots and divides
      dp x accum, raises --accum so the global batch and the LR schedule stay the same, and
      relaunches with --resume-if-any after a backoff (--backoff S, doubled each restart, at most
      30 s). The trainer resumes from its newest valid checkpoint, resharded to the new layout.
   5. Stops after --max-restarts failures with a report (what failed where and when, restarts,
      steps lost, time lost). Exit status 0 only when the run finished; 1 when the budget ran out
      or the job failed before its first step (a configuration error is not restarted); 2 for bad
      flags; 128+N when stopped by signal N (SIGINT / SIGTERM: the ranks are told to save and stop).

   Every event goes to stderr as one `ptrun:` line, as a JSON line to --events FILE (default
   CKPT_DIR/ptrun_events.jsonl) as it happens, and at the end into the trainer's --log (when it has
   one), where build/ptreport marks restarts on the loss chart and draws the failure timeline.

   Faults for tests (a trainer built with -DPTRAIN_TEST_HOOKS, make build/pttrain-hooks):
   PTRAIN_FAULT=KIND:STEP:RANK[,...] is forwarded to the ranks; each fault fires once per supervised
   run: one that fired is left out of the relaunches' PTRAIN_FAULT. */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/random.h>
#endif
#include "ptflags.h"
#include "ptrun_line.h"

#define MAXH 64      /* hosts */
#define MAXR 1024    /* ranks */
#define MAXF 64      /* failures */
#define MAXFAULT 16  /* entries of PTRAIN_FAULT */
#define MAX_PENDING 64 /* connections that have not said hello yet */
#define AUTH_S 5.0   /* seconds a connection has for its hello */
enum { PH_SETUP = 0, PH_STEP, PH_CKPT, PH_EVAL, PH_N };
static const char *const phase_name[PH_N] = {"setup", "step", "ckpt", "eval"};

typedef struct host {
    char name[256];
    int slots, up;
    char addr[4][64]; /* its addresses, resolved when the hostfile is read (numeric, as inet_ntop writes them) */
    int naddr;
} host;

/* one rank's channel */
typedef struct rankc {
    int fd, hello, bye, rank, stopped;
    long pid;
    char host[256], mpi[48]; /* host: the name the rank gave (checked); mpi: the MPI call in flight (OP@COMM), or - */
    char peer[64];           /* the address it connected from */
    char thost[256];         /* where teardown reaches it: "" on this machine, else the hostfile's name of its host */
    double t_conn;           /* when it connected: a hello is due within AUTH_S */
    int64_t step, done, first, total;
    int phase;
    double work, t_progress, t_beat, t_phase; /* last progress, last line, when the phase began */
    char in[2048];
    size_t nin;
} rankc;

/* one failure, from the fault to the first step after the relaunch */
typedef struct failure {
    int attempt, rank, dp_from, dp_to, accum_from, accum_to, has_fault;
    char kind[32], what[32], host[256], detail[512];
    int64_t step, done, resume;
    double t_fault, t_detect, t_down, t_relaunch, t_recovered;
} failure;

typedef struct fault_entry {
    char text[64], kind[32];
    int64_t step;
    int rank, fired; /* rank -1 = * */
} fault_entry;

static struct {
    /* flags */
    const char *hostfile, *mpirun, *agent, *events_path, *listen_addr, *advertise;
    const char *mpi_args[64], *xvars[64];
    int nmpi, nx, max_restarts;
    double backoff, probe_timeout, floor_s, lease, fixed[PH_N], setup_s;
    char **targv;
    int targc;
    /* the trainer's layout and paths */
    int dp0, tp, pp, accum0, batch, mbs;
    const char *ckpt_dir, *log_path;
    /* state */
    host hosts[MAXH];
    int nhosts;
    char me[256];
    int lfd, port, sigpipe[2];
    int nr, world, attempt, dp, accum;
    pid_t job;
    int job_status, job_done;
    double longest[PH_N];
    int nf;
    fault_entry faults[MAXFAULT];
    int nfaults;
    FILE *events;
    char *evbuf; /* the events for the trainer's log, written at the end */
    size_t evn, evcap;
    volatile sig_atomic_t stop_sig;
    int straggle[MAXR];
    int64_t straggle_done;
    int reported_straggler[MAXR];
    double t_start;
    char secret[33], launch_id[17]; /* this run's: the secret (environment only) and its id (not secret) */
    char listen_ip[64], adv[256];   /* the address ptrun listens on, the one the ranks dial */
    int nrej, nrej_quiet;           /* rejected lines and connections: logged, and how many were not */
    double t_rej;
} S;
static rankc R[MAXR];  /* the channels of this launch */
static failure F[MAXF]; /* the failures so far */

static void nap(double s) { /* sleeps s seconds */
    struct timespec ts;
    ts.tv_sec = (time_t)s, ts.tv_nsec = (long)((s - (double)(time_t)s) * 1e9);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}
static double now_wall(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + 1e-6 * (double)tv.tv_usec;
}
static double now_mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
/* ptrun's lines on stderr */
static void say(const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "ptrun: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
}
/* an event: a JSON line (fields already JSON: "k":v,...) to --events now and to the log at the end */
static void event(const char *name, int64_t step, double wall, const char *fmt, ...) {
    char body[1500], line[2048];
    va_list ap;
    int n;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    n = snprintf(line, sizeof line, "{\"event\":\"%s\",\"step\":%lld,\"wall\":%.6f,\"attempt\":%d%s%s}\n", name, (long long)step, wall, S.attempt,
                 body[0] ? "," : "", body);
    if (n <= 0 || n >= (int)sizeof line) return;
    if (S.events) fputs(line, S.events), fflush(S.events);
    if (S.evn + (size_t)n + 1 > S.evcap) {
        size_t cap = S.evcap ? 2 * S.evcap + (size_t)n : 4096;
        char *p = (char *)realloc(S.evbuf, cap);
        if (!p) return;
        S.evbuf = p, S.evcap = cap;
    }
    memcpy(S.evbuf + S.evn, line, (size_t)n + 1);
    S.evn += (size_t)n;
}
/* s as a JSON string's contents: every string ptrun writes into an event goes through this, the one
   escaping writer (ptrun_line.h: quotes, backslashes, control characters, bytes that are not UTF-8) */
static const char *jstr(const char *s, char *buf, size_t len) { return ptl_json_esc(buf, len, s); }

/* a line or a connection refused: a `ptrun:` line and a ptrun_rejected event, at most 20 of each
   in 10 s (a flood of them is counted, and the count said with the next one logged) */
static void reject(const char *peer, int rank, const char *why) {
    double t = now_mono();
    char a[200], b[1200];
    S.nrej++;
    if (t - S.t_rej > 10) {
        if (S.nrej_quiet > 20) say("%d more rejections were not logged one by one (%d in all)", S.nrej_quiet - 20, S.nrej - 1);
        S.t_rej = t, S.nrej_quiet = 0;
    }
    if (S.nrej_quiet >= 20) {
        S.nrej_quiet++;
        return;
    }
    if (S.nrej_quiet++ == 19) say("rejected (%s): %s; the next rejections of the coming 10 s are not logged one by one", peer, why);
    else say("rejected (%s): %s", peer, why);
    event("ptrun_rejected", 0, now_wall(), "\"from\":\"%s\",\"rank\":%d,\"why\":\"%s\",\"rejected\":%d", jstr(peer, a, sizeof a), rank,
          jstr(why, b, sizeof b), S.nrej);
}

static void on_signal(int sig) {
    char c = (char)sig;
    if (sig == SIGINT || sig == SIGTERM) S.stop_sig = sig;
    if (write(S.sigpipe[1], &c, 1) < 0) {}
}

/* ---- the trainer's command line ------------------------------------------------------------- */
static const char *targ(const char *flag) { /* the value of --flag in the trainer's arguments, or NULL */
    int i;
    for (i = 1; i + 1 < S.targc; i++)
        if (!strcmp(S.targv[i], flag)) return S.targv[i + 1];
    return NULL;
}
static int targ_int(const char *flag, int dflt) {
    const char *v = targ(flag);
    return v ? atoi(v) : dflt;
}

/* ---- hosts ------------------------------------------------------------------------------------ */
/* a hostfile's host: a name or an address, maybe user@; never an option of the agent (no leading '-') */
static int hostname_ok(const char *h) {
    const char *p;
    if (!((*h >= 'a' && *h <= 'z') || (*h >= 'A' && *h <= 'Z') || (*h >= '0' && *h <= '9'))) return 0;
    for (p = h; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("._-:@", *p))) return 0;
    return p - h <= 253;
}
static int is_local(const char *h) {
    return !strcmp(h, "localhost") || !strncmp(h, "127.", 4) || !strcmp(h, "::1") || !strcasecmp(h, S.me);
}
/* the addresses of a host (user@ left out), numeric; none for this machine's names or when it does not resolve */
static void resolve(host *h) {
    struct addrinfo hints, *res = NULL, *a;
    const char *name = strchr(h->name, '@') ? strchr(h->name, '@') + 1 : h->name;
    h->naddr = 0;
    if (is_local(name)) return;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC, hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(name, NULL, &hints, &res) != 0) return;
    for (a = res; a && h->naddr < 4; a = a->ai_next)
        if (getnameinfo(a->ai_addr, a->ai_addrlen, h->addr[h->naddr], sizeof h->addr[0], NULL, 0, NI_NUMERICHOST) == 0) h->naddr++;
    freeaddrinfo(res);
}
static int read_hosts(char *err, size_t errlen) {
    FILE *f;
    char line[1024];
    int ln = 0, i, nold = S.nhosts;
    static host old[MAXH]; /* what the last probe found, kept by name */
    memcpy(old, S.hosts, sizeof old);
    S.nhosts = 0;
    if (!S.hostfile) { /* this machine, as many slots as the first launch needs (set later) */
        snprintf(S.hosts[0].name, sizeof S.hosts[0].name, "localhost");
        S.hosts[0].slots = 0, S.hosts[0].up = 1, S.nhosts = 1;
        return 0;
    }
    if (!(f = fopen(S.hostfile, "r"))) return snprintf(err, errlen, "--hosts %s: %s", S.hostfile, strerror(errno)), -1;
    while (fgets(line, sizeof line, f)) {
        char name[256], *p = line, *h;
        int slots = 1, n = 0;
        ln++;
        if ((h = strchr(line, '#')) != NULL) *h = 0;
        while (*p == ' ' || *p == '\t') p++;
        if (!*p || *p == '\n' || *p == '\r') continue;
        if (sscanf(p, "%255s%n", name, &n) != 1) continue;
        p += n;
        while (*p == ' ' || *p == '\t') p++;
        if (*p && *p != '\n' && *p != '\r') {
            if (sscanf(p, "slots=%d", &slots) != 1 || slots < 1 || slots > 4096) {
                fclose(f);
                return snprintf(err, errlen, "--hosts %s:%d: expected 'HOST slots=N' (N >= 1), found '%.100s'", S.hostfile, ln, line), -1;
            }
        }
        if (!hostname_ok(name)) {
            fclose(f);
            return snprintf(err, errlen, "--hosts %s:%d: '%.100s' is not a host name or address (expected letters, digits, '.', '_', '-', ':', '@', "
                                         "beginning with a letter or a digit)", S.hostfile, ln, name), -1;
        }
        if (S.nhosts == MAXH) break;
        snprintf(S.hosts[S.nhosts].name, sizeof S.hosts[S.nhosts].name, "%s", name);
        resolve(&S.hosts[S.nhosts]);
        S.hosts[S.nhosts].slots = slots, S.hosts[S.nhosts].up = 1;
        for (i = 0; i < nold; i++)
            if (!strcmp(old[i].name, name)) S.hosts[S.nhosts].up = old[i].up;
        S.nhosts++;
    }
    fclose(f);
    if (!S.nhosts) return snprintf(err, errlen, "--hosts %s: no host in it (expected lines 'HOST slots=N')", S.hostfile), -1;
    return 0;
}

/* the remote shell of Open MPI: --agent, else the plm_rsh_agent among the mpirun arguments, else ssh */
static const char *agent(void) {
    int i;
    if (S.agent) return S.agent;
    for (i = 0; i + 2 < S.nmpi; i++)
        if (!strcmp(S.mpi_args[i], "--mca") && !strcmp(S.mpi_args[i + 1], "plm_rsh_agent")) return S.mpi_args[i + 2];
    return "ssh";
}
/* runs the agent with the argument vector AGENT-WORDS... HOST CMD in the background (execvp, no
   shell here: the agent's words are --agent split at blanks; HOST a hostfile's name, checked when the
   hostfile was read; CMD a fixed command line built only from numbers and this run's id, which the
   agent, like ssh, gives to the remote host's shell); its pid */
static pid_t remote(const char *h, const char *cmd) {
    char words[1024], *argv[40], *tok, *save = NULL;
    int argc = 0;
    pid_t p;
    snprintf(words, sizeof words, "%s", agent());
    for (tok = strtok_r(words, " \t", &save); tok && argc < 36; tok = strtok_r(NULL, " \t", &save)) argv[argc++] = tok;
    if (!argc) return -1;
    argv[argc++] = (char *)h, argv[argc++] = (char *)cmd, argv[argc] = NULL;
    if ((p = fork()) == 0) {
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0) dup2(nul, 0), dup2(nul, 1);
        execvp(argv[0], argv);
        _exit(127);
    }
    return p;
}
/* waits for pids until deadline; ok[i] = exited 0; the rest are killed */
static void wait_all(pid_t *pids, int *ok, int n, double deadline) {
    int left = 0, i;
    for (i = 0; i < n; i++) ok[i] = 0, left += pids[i] > 0;
    while (left > 0 && now_mono() < deadline) {
        for (i = 0; i < n; i++) {
            int st;
            if (pids[i] <= 0) continue;
            if (waitpid(pids[i], &st, WNOHANG) == pids[i]) ok[i] = WIFEXITED(st) && WEXITSTATUS(st) == 0, pids[i] = 0, left--;
        }
        if (left > 0) nap(0.02);
    }
    for (i = 0; i < n; i++)
        if (pids[i] > 0) kill(pids[i], SIGKILL), waitpid(pids[i], NULL, 0);
}
/* which hosts answer: the local one always; the others through the agent, in parallel */
static void probe(void) {
    pid_t pids[MAXH];
    int ok[MAXH], i;
    for (i = 0; i < S.nhosts; i++) pids[i] = is_local(S.hosts[i].name) ? 0 : remote(S.hosts[i].name, "true");
    wait_all(pids, ok, S.nhosts, now_mono() + S.probe_timeout);
    for (i = 0; i < S.nhosts; i++) {
        int up = is_local(S.hosts[i].name) || ok[i];
        if (!up) say("host %s does not answer (%s %s true, %.0f s): left out this time", S.hosts[i].name, agent(), S.hosts[i].name, S.probe_timeout);
        else if (!S.hosts[i].up) say("host %s answers again: used again", S.hosts[i].name);
        S.hosts[i].up = up;
    }
}

/* ---- the layout -------------------------------------------------------------------------------- */
/* the largest dp <= dp0 that fits `slots` and divides dp0 x accum0 (the rows of a micro-batch stay the
   same); 0 when none */
static int pick_dp(int slots) {
    int d, cap = slots / (S.tp * S.pp);
    if (cap > S.dp0) cap = S.dp0;
    for (d = cap; d >= 1; d--)
        if ((S.dp0 * S.accum0) % d == 0) return d;
    return 0;
}
static int healthy_slots(char *names, size_t len) {
    int i, n = 0;
    names[0] = 0;
    for (i = 0; i < S.nhosts; i++)
        if (S.hosts[i].up) {
            n += S.hosts[i].slots;
            snprintf(names + strlen(names), len - strlen(names), "%s%s", names[0] ? "," : "", S.hosts[i].name);
        }
    return n;
}
static int64_t latest_step(void) { /* the step CKPT_DIR/latest names, -1 when none */
    char path[1200], line[256];
    FILE *f;
    int64_t k = -1;
    snprintf(path, sizeof path, "%s/latest", S.ckpt_dir);
    if ((f = fopen(path, "r")) != NULL) {
        if (fgets(line, sizeof line, f) && !strncmp(line, "step_", 5)) k = strtoll(line + 5, NULL, 10);
        fclose(f);
    }
    return k;
}

/* ---- the job ------------------------------------------------------------------------------------ */
static void fault_env(void) { /* PTRAIN_FAULT without the faults that fired */
    char v[1024] = "";
    int i;
    if (!S.nfaults) return;
    for (i = 0; i < S.nfaults; i++)
        if (!S.faults[i].fired) snprintf(v + strlen(v), sizeof v - strlen(v), "%s%s", v[0] ? "," : "", S.faults[i].text);
    setenv("PTRAIN_FAULT", v, 1);
}
static int launch(char *hostsbuf, size_t hlen) {
    static char hf[512], sup[300], att[32], lease[32], sdp[16], sacc[16];
    char *argv[512], *xs[256];
    int argc = 0, i, nx = 0, np = S.dp * S.tp * S.pp, left = np;
    FILE *f;
    extern char **environ;
    snprintf(hf, sizeof hf, "%s/.ptrun.%ld.hosts", S.ckpt_dir, (long)getpid());
    if (!(f = fopen(hf, "w"))) return say("cannot write the hostfile %s: %s", hf, strerror(errno)), -1;
    hostsbuf[0] = 0;
    for (i = 0; i < S.nhosts && left > 0; i++)
        if (S.hosts[i].up) {
            int n = S.hosts[i].slots && S.hosts[i].slots < left ? S.hosts[i].slots : left;
            fprintf(f, "%s slots=%d\n", S.hosts[i].name, n);
            snprintf(hostsbuf + strlen(hostsbuf), hlen - strlen(hostsbuf), "%s%s", hostsbuf[0] ? "," : "", S.hosts[i].name);
            left -= n;
        }
    fclose(f);
    snprintf(sup, sizeof sup, "%s:%d", S.adv, S.port);
    snprintf(att, sizeof att, "%d", S.attempt);
    snprintf(lease, sizeof lease, "%g", S.lease);
    setenv("PTRAIN_SUPERVISOR", sup, 1);
    setenv("PTRAIN_SUPERVISOR_ATTEMPT", att, 1);
    setenv("PTRAIN_SUPERVISOR_LEASE", lease, 1);
    /* the secret and the id reach the ranks through the environment only: mpirun forwards them by
       name (-x NAME below), so their values are on no command line */
    setenv("PTRAIN_SUPERVISOR_SECRET", S.secret, 1);
    setenv("PTRAIN_SUPERVISOR_ID", S.launch_id, 1);
    fault_env();
    argv[argc++] = (char *)S.mpirun;
    for (i = 0; i < S.nmpi; i++) argv[argc++] = (char *)S.mpi_args[i];
    argv[argc++] = (char *)"--hostfile", argv[argc++] = hf;
    static char snp[16];
    snprintf(snp, sizeof snp, "%d", np);
    argv[argc++] = (char *)"-np", argv[argc++] = snp;
    /* the environment the ranks need, named: PTRAIN_*, OMP_*, and -x NAME */
    for (i = 0; environ[i] && nx < 200; i++)
        if (!strncmp(environ[i], "PTRAIN_", 7) || !strncmp(environ[i], "OMP_", 4)) {
            size_t n = strcspn(environ[i], "=");
            char *name = (char *)malloc(n + 1);
            if (!name) continue;
            memcpy(name, environ[i], n), name[n] = 0;
            xs[nx++] = name;
        }
    for (i = 0; i < S.nx && nx < 250; i++) xs[nx++] = strdup(S.xvars[i]);
    for (i = 0; i < nx; i++) argv[argc++] = (char *)"-x", argv[argc++] = xs[i];
    argv[argc++] = S.targv[0];
    for (i = 1; i < S.targc && argc < 480; i++) {
        const char *a = S.targv[i];
        if ((!strcmp(a, "--dp") || !strcmp(a, "--accum")) && i + 1 < S.targc) {
            i++;
            continue;
        }
        if (S.attempt > 1 && (!strcmp(a, "--resume") || !strcmp(a, "--resume-if-any"))) continue;
        argv[argc++] = S.targv[i];
    }
    snprintf(sdp, sizeof sdp, "%d", S.dp);
    snprintf(sacc, sizeof sacc, "%d", S.accum);
    argv[argc++] = (char *)"--dp", argv[argc++] = sdp;
    argv[argc++] = (char *)"--accum", argv[argc++] = sacc;
    if (S.attempt > 1) argv[argc++] = (char *)"--resume-if-any";
    argv[argc] = NULL;
    S.job_done = 0, S.job_status = 0;
    S.job = fork();
    if (S.job == 0) {
        setpgid(0, 0); /* its own process group: the teardown signals all of it */
        close(S.lfd);
        execvp(argv[0], argv);
        fprintf(stderr, "ptrun: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    for (i = 0; i < nx; i++) free(xs[i]);
    if (S.job < 0) return say("fork: %s", strerror(errno)), -1;
    setpgid(S.job, S.job);
    return 0;
}

static void send_all(const char *msg) {
    int i;
    for (i = 0; i < S.nr; i++)
        if (R[i].fd >= 0 && send(R[i].fd, msg, strlen(msg), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {}
}
static void close_rank(rankc *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
}
static void reap_job(int block) {
    int st;
    if (S.job <= 0 || S.job_done) return;
    if (waitpid(S.job, &st, block ? 0 : WNOHANG) == S.job) S.job_done = 1, S.job_status = st;
}

/* whether addr (numeric) is one of this machine's: a socket can be bound to it */
static int addr_is_local(const char *addr) {
    struct addrinfo hints, *res = NULL;
    int ok = 0, fd;
    memset(&hints, 0, sizeof hints);
    hints.ai_flags = AI_NUMERICHOST, hints.ai_socktype = SOCK_DGRAM;
    if (getaddrinfo(addr, NULL, &hints, &res) != 0 || !res) return 0;
    if ((fd = socket(res->ai_family, SOCK_DGRAM, 0)) >= 0) ok = bind(fd, res->ai_addr, res->ai_addrlen) == 0, close(fd);
    freeaddrinfo(res);
    return ok;
}
/* where a rank that says host=name and connected from peer runs: 0 with thost "" (this machine)
   or the hostfile's name of its host; -1 when it is none of the hostfile's hosts */
static int rank_host(const char *name, const char *peer, char *thost, size_t len) {
    int i, j;
    thost[0] = 0;
    for (i = 0; i < S.nhosts; i++) /* the hostfile's name */
        if (!strcasecmp(name, S.hosts[i].name)) {
            if (!is_local(S.hosts[i].name)) snprintf(thost, len, "%s", S.hosts[i].name);
            return 0;
        }
    if ((!strcasecmp(name, S.me) || !strcmp(name, "localhost")) && addr_is_local(peer)) return 0; /* this machine's own name */
    for (i = 0; i < S.nhosts; i++) /* its own name for a host the hostfile names otherwise (an address): known by the address it comes from */
        for (j = 0; j < S.hosts[i].naddr; j++)
            if (!strcmp(peer, S.hosts[i].addr[j])) {
                if (!is_local(S.hosts[i].name)) snprintf(thost, len, "%s", S.hosts[i].name);
                return 0;
            }
    return -1;
}

/* a line from a rank (n bytes, no newline): 0, or -1 when the channel is to be closed. The first line
   of a connection must be a hello with this run's secret, of this launch (world, attempt), of a rank
   no other channel holds, from one of the hostfile's hosts: else the connection is closed and
   logged. A later line that does not parse is dropped and logged, never acted on. */
static int rank_line(rankc *c, const char *line, size_t n, double t) {
    ptl_line L;
    char err[400], why[600];
    if (ptl_parse(line, n, &L, err, sizeof err) != 0) {
        if (!c->hello) return snprintf(why, sizeof why, "a connection whose first line is not a hello of this job: %s; closed", err), reject(c->peer, -1, why), -1;
        snprintf(why, sizeof why, "a line of rank %d: %s; dropped", c->rank, err);
        reject(c->peer, c->rank, why);
        return 0;
    }
    if (!c->hello && L.verb != PTL_HELLO) {
        static const char *const vn[] = {"", "hello", "start", "beat", "fault", "bye"};
        snprintf(why, sizeof why, "a connection whose first line is not a hello (a %s line); closed", vn[L.verb]);
        return reject(c->peer, -1, why), -1;
    }
    if (L.verb == PTL_HELLO) {
        int j, np = S.dp * S.tp * S.pp;
        char thost[256];
        if (c->hello) return reject(c->peer, c->rank, "a second hello on one channel; dropped"), 0;
        if (!ptl_secret_eq(L.secret, S.secret)) return reject(c->peer, -1, "a hello without this job's secret; closed"), -1;
        if (L.attempt != S.attempt) { /* a rank of an earlier launch, still going */
            snprintf(why, sizeof why, "a hello of attempt %lld (this launch: %d), rank %lld on host %s; closed", L.attempt, S.attempt, L.rank, L.host);
            return reject(c->peer, (int)L.rank, why), -1;
        }
        if (L.world != np || L.rank >= L.world) {
            snprintf(why, sizeof why, "a hello of rank %lld of world %lld (this launch: %d ranks); closed", L.rank, L.world, np);
            return reject(c->peer, -1, why), -1;
        }
        for (j = 0; j < S.nr; j++)
            if (&R[j] != c && R[j].fd >= 0 && R[j].hello && R[j].rank == L.rank) {
                snprintf(why, sizeof why, "a hello of rank %lld, which has a channel already (from %s, pid %ld); closed", L.rank, R[j].peer, R[j].pid);
                return reject(c->peer, (int)L.rank, why), -1;
            }
        if (rank_host(L.host, c->peer, thost, sizeof thost) != 0) {
            snprintf(why, sizeof why, "a hello of rank %lld from host %s (address %s), not one of the hostfile's hosts; closed", L.rank, L.host, c->peer);
            return reject(c->peer, (int)L.rank, why), -1;
        }
        c->hello = 1, c->rank = (int)L.rank, c->pid = (long)L.pid, c->t_progress = c->t_phase = t, c->phase = PH_SETUP;
        snprintf(c->host, sizeof c->host, "%s", L.host);
        snprintf(c->thost, sizeof c->thost, "%s", thost);
        if ((int)L.world > S.world) S.world = (int)L.world;
    } else if (L.verb == PTL_START) {
        c->first = L.first, c->total = L.total, c->done = L.first, c->t_progress = t;
    } else if (L.verb == PTL_BEAT) {
        int p = L.phase;
        snprintf(c->mpi, sizeof c->mpi, "%s", L.mpi);
        if (L.step != c->step || L.done != c->done || p != c->phase) {
            double dur = t - c->t_progress;
            if (c->phase != PH_SETUP && !(c->phase == PH_STEP && c->done == c->first && L.done == c->first) && dur > S.longest[c->phase])
                S.longest[c->phase] = dur; /* the first step of a launch is its warm-up: not a calibration */
            if (p != c->phase) c->t_phase = t;
            c->t_progress = t;
        }
        c->step = L.step, c->done = L.done, c->phase = p, c->work = L.work;
    } else if (L.verb == PTL_FAULT) {
        const char *k = L.kind;
        long long step = L.step;
        double tf = L.t;
        int i;
        char h[600], kk[100];
        say("fault injected on rank %d (host %s): %s at step %lld", c->rank, c->host, k, step);
        for (i = 0; i < S.nfaults; i++) /* it fires once per supervised run */
            if (!S.faults[i].fired && !strncmp(k, S.faults[i].kind, strlen(S.faults[i].kind)) && S.faults[i].step == step &&
                (S.faults[i].rank < 0 || S.faults[i].rank == c->rank)) {
                S.faults[i].fired = 1;
                break;
            }
        if (S.nf < MAXF && strncmp(k, "slow", 4)) { /* the failure it will cause, stamped with its own time */
            failure *f = &F[S.nf];
            if (!f->has_fault) {
                memset(f, 0, sizeof *f);
                f->has_fault = 1, f->t_fault = tf, f->rank = c->rank, f->step = step;
                snprintf(f->kind, sizeof f->kind, "%s", k);
                snprintf(f->host, sizeof f->host, "%s", c->host);
            }
        }
        /* a slow rank is a straggler, not a failure: its own event */
        event(strncmp(k, "slow", 4) ? "ptrun_fault" : "ptrun_slow", step, tf, "\"rank\":%d,\"host\":\"%s\",\"kind\":\"%s\"", c->rank,
              jstr(c->host, h, sizeof h), jstr(k, kk, sizeof kk));
    } else if (L.verb == PTL_BYE) {
        c->bye = 1, c->done = L.done, c->stopped = L.stopped;
    }
    c->t_beat = t;
    return 0;
}
/* the bytes received on a channel: its whole lines, each to rank_line; -1 when it is to be closed */
static int rank_bytes(rankc *c, const char *buf, size_t k, double t) {
    size_t i;
    for (i = 0; i < k; i++) {
        if (buf[i] != '\n') {
            if (c->nin < sizeof c->in - 1) c->in[c->nin] = buf[i];
            c->nin++; /* counted past the buffer: a line too long is refused whole */
            continue;
        }
        if (c->nin >= sizeof c->in - 1) {
            char why[200];
            snprintf(why, sizeof why, "a line of %zu bytes or more (at most %d); %s", c->nin, PTL_MAX_LINE, c->hello ? "dropped" : "closed");
            c->nin = 0;
            reject(c->peer, c->hello ? c->rank : -1, why);
            if (!c->hello) return -1;
            continue;
        }
        c->in[c->nin] = 0;
        if (rank_line(c, c->in, c->nin, t) < 0) return -1;
        c->nin = 0;
    }
    return 0;
}

/* the straggler check, once every rank has finished step `done` */
static void stragglers(void) {
    double w[MAXR], med;
    int i, n = 0;
    int64_t d = -1;
    for (i = 0; i < S.nr; i++) {
        if (R[i].fd < 0 || !R[i].hello) continue;
        if (d < 0) d = R[i].done;
        if (R[i].done != d || R[i].done <= R[i].first) return;
        w[n++] = R[i].work;
    }
    if (n < 2 || d <= S.straggle_done) return;
    S.straggle_done = d;
    { /* the lower median */
        int a, b;
        for (a = 1; a < n; a++)
            for (b = a; b > 0 && w[b - 1] > w[b]; b--) {
                double x = w[b];
                w[b] = w[b - 1], w[b - 1] = x;
            }
        med = w[(n - 1) / 2];
    }
    for (i = 0; i < S.nr; i++) {
        rankc *c = &R[i];
        if (c->fd < 0 || !c->hello || c->rank >= MAXR) continue;
        if (c->work > 1.5 * med + 0.02) S.straggle[c->rank]++;
        else S.straggle[c->rank] = 0;
        if (S.straggle[c->rank] == 3 && !S.reported_straggler[c->rank]) {
            char h[300];
            S.reported_straggler[c->rank] = 1;
            say("straggler: rank %d on host %s works %.3f s a step against a median of %.3f s (steps %lld-%lld); not restarted", c->rank, c->host, c->work,
                med, (long long)d - 3, (long long)d - 1);
            event("ptrun_straggler", d - 1, now_wall(), "\"rank\":%d,\"host\":\"%s\",\"work_s\":%.6f,\"median_s\":%.6f", c->rank, jstr(c->host, h, sizeof h),
                  c->work, med);
        }
    }
}

static double timeout_of(int phase, const rankc *c) {
    double t;
    if (S.fixed[phase] > 0) return S.fixed[phase];
    if (phase == PH_SETUP || (phase == PH_STEP && c->done == c->first) || S.longest[phase] <= 0)
        return S.setup_s; /* the first step (its warm-up), a phase not seen yet: the set-up's timeout */
    t = 5 * S.longest[phase];
    return t > S.floor_s ? t : S.floor_s;
}

enum { OUT_FINISHED = 0, OUT_FAILED, OUT_STOPPED, OUT_CONFIG };

/* watches one launch until it ends or fails; fills F[S.nf] (not yet counted) on a failure */
static int supervise(void) {
    double t_ok = 0, t_stop_sent = 0;
    int recovered = 0;
    int64_t resume_at = -1;
    for (;;) {
        struct pollfd p[MAXR + 2];
        int np = 0, i, idx[MAXR + 2];
        double t;
        p[np].fd = S.lfd, p[np].events = POLLIN, idx[np++] = -1;
        p[np].fd = S.sigpipe[0], p[np].events = POLLIN, idx[np++] = -2;
        for (i = 0; i < S.nr; i++)
            if (R[i].fd >= 0) p[np].fd = R[i].fd, p[np].events = POLLIN, idx[np++] = i;
        poll(p, (nfds_t)np, 50);
        t = now_mono();
        for (i = 0; i < np; i++) {
            if (!p[i].revents) continue;
            if (idx[i] == -1) { /* a rank connects: a channel of its own, on probation until its hello */
                struct sockaddr_storage pa;
                socklen_t pl = sizeof pa;
                int fd = accept(S.lfd, (struct sockaddr *)&pa, &pl), j, slot = -1, pending = 0;
                char peer[64] = "?";
                if (fd < 0) continue;
                fcntl(fd, F_SETFD, FD_CLOEXEC);
                if (getnameinfo((struct sockaddr *)&pa, pl, peer, sizeof peer, NULL, 0, NI_NUMERICHOST) != 0) snprintf(peer, sizeof peer, "?");
                for (j = 0; j < S.nr; j++) {
                    pending += R[j].fd >= 0 && !R[j].hello;
                    if (slot < 0 && R[j].fd < 0 && !R[j].hello) slot = j; /* a slot no rank holds: used again */
                }
                if (slot < 0 && S.nr < MAXR) slot = S.nr++;
                if (slot < 0 || pending >= MAX_PENDING) {
                    char why[200];
                    snprintf(why, sizeof why, "a connection while %d others have not said hello yet%s; closed", pending, slot < 0 ? " and every channel is taken" : "");
                    reject(peer, -1, why);
                    close(fd);
                } else {
                    rankc *c = &R[slot];
                    memset(c, 0, sizeof *c);
                    c->fd = fd, c->rank = -1, c->t_beat = c->t_progress = c->t_conn = t;
                    snprintf(c->peer, sizeof c->peer, "%s", peer);
                }
            } else if (idx[i] == -2) {
                char b[16];
                if (read(S.sigpipe[0], b, sizeof b) < 0) {}
            } else {
                rankc *c = &R[idx[i]];
                char buf[4096];
                ssize_t k = recv(c->fd, buf, sizeof buf, 0);
                if (k > 0) {
                    if (rank_bytes(c, buf, (size_t)k, t) < 0) close_rank(c);
                } else if (k == 0 || (errno != EINTR && errno != EAGAIN)) {
                    int was = c->hello && !c->bye;
                    close_rank(c);
                    if (was) { /* died: its channel closed without a goodbye */
                        failure *f = &F[S.nf];
                        if (!f->has_fault) memset(f, 0, sizeof *f);
                        f->t_detect = now_wall();
                        snprintf(f->what, sizeof f->what, "died");
                        snprintf(f->detail, sizeof f->detail, "rank %d on host %s (pid %ld): its channel closed without a goodbye at step %lld, phase %s",
                                 c->rank, c->host, c->pid, (long long)c->step, phase_name[c->phase]);
                        if (!f->has_fault) f->rank = c->rank, snprintf(f->host, sizeof f->host, "%s", c->host), f->step = c->step;
                        return OUT_FAILED;
                    }
                }
            }
        }
        /* a connection that has not said its hello within AUTH_S seconds is not one of the ranks */
        for (i = 0; i < S.nr; i++)
            if (R[i].fd >= 0 && !R[i].hello && t - R[i].t_conn > AUTH_S) {
                char why[120];
                snprintf(why, sizeof why, "a connection without a hello for %.0f s; closed", AUTH_S);
                reject(R[i].peer, -1, why);
                close_rank(&R[i]);
            }
        /* progress: the first step completed after a relaunch */
        if (!recovered && S.nf > 0 && F[S.nf - 1].attempt == S.attempt - 1)
            for (i = 0; i < S.nr; i++)
                if (R[i].fd >= 0 && R[i].hello && R[i].done > R[i].first) {
                    failure *f = &F[S.nf - 1];
                    f->t_recovered = now_wall();
                    f->resume = R[i].first;
                    recovered = 1;
                    say("recovered: step %lld completed %.2f s after the %s", (long long)R[i].done, f->t_recovered - (f->has_fault ? f->t_fault : f->t_detect),
                        f->has_fault ? "fault" : "detection");
                    event("ptrun_recovered", R[i].done - 1, f->t_recovered, "\"recover_s\":%.3f,\"steps_lost\":%lld",
                          f->t_recovered - (f->has_fault ? f->t_fault : f->t_detect), (long long)(f->done - f->resume));
                    break;
                }
        if (resume_at < 0)
            for (i = 0; i < S.nr; i++)
                if (R[i].hello && R[i].total > 0) resume_at = R[i].first;
        stragglers();
        /* the lease */
        if (t - t_ok >= 0.25) {
            send_all("ok\n");
            t_ok = t;
        }
        if (S.stop_sig && t_stop_sent == 0) {
            say("signal %d: telling the ranks to save and stop", (int)S.stop_sig);
            send_all("stop\n");
            t_stop_sent = t;
        }
        /* hangs: no progress for longer than the phase's timeout */
        for (i = 0; i < S.nr; i++) {
            rankc *c = &R[i];
            double to;
            if (c->fd < 0 || !c->hello || c->bye) continue;
            to = timeout_of(c->phase, c);
            if (t - c->t_progress > to) {
                failure *f = &F[S.nf];
                int j, stalled = 0, silent = -1;
                for (j = 0; j < S.nr; j++)
                    if (R[j].fd >= 0 && R[j].hello) {
                        stalled += t - R[j].t_progress > 0.5 * to;
                        if (t - R[j].t_beat > 2.0 && silent < 0) silent = j; /* a stopped process beats no more */
                    }
                char why[300] = "", in[120] = "", out[120] = "";
                int nin = 0, nout = 0, culprit = -1;
                if (!f->has_fault) memset(f, 0, sizeof *f);
                /* who waits in MPI (for someone) and who does not (stuck in its own code) */
                for (j = 0; j < S.nr; j++) {
                    rankc *o = &R[j];
                    if (o->fd < 0 || !o->hello || o->bye) continue;
                    if (strcmp(o->mpi, "-") && o->mpi[0]) {
                        if (nin++ < 6) snprintf(in + strlen(in), sizeof in - strlen(in), "%s%d (%s)", nin > 1 ? ", " : "", o->rank, o->mpi);
                    } else {
                        if (nout++ < 6) snprintf(out + strlen(out), sizeof out - strlen(out), "%s%d", nout > 1 ? ", " : "", o->rank);
                        if (culprit < 0) culprit = j;
                    }
                }
                if (silent >= 0) c = &R[silent], snprintf(why, sizeof why, "; rank %d beats no more (a stopped process?)", c->rank);
                else if (nin > 0 && nout > 0) {
                    c = &R[culprit];
                    snprintf(why, sizeof why, "; rank%s %s in no MPI call (stuck in its own code?) while rank%s %s wait%s in MPI", nout > 1 ? "s" : "", out,
                             nin > 1 ? "s" : "", in, nin > 1 ? "" : "s");
                }
                f->t_detect = now_wall();
                snprintf(f->what, sizeof f->what, "hung");
                snprintf(f->detail, sizeof f->detail, "no progress for %.1f s (the timeout of phase %s: %.1f s) at step %lld on %d rank(s)%s", t - c->t_progress,
                         phase_name[c->phase], to, (long long)c->step, stalled, why);
                if (!f->has_fault) f->rank = c->rank, snprintf(f->host, sizeof f->host, "%s", c->host), f->step = c->step;
                return OUT_FAILED;
            }
        }
        /* the launcher */
        reap_job(0);
        if (S.job_done) {
            int all_bye = S.nr > 0, any_hello = 0, code = WIFEXITED(S.job_status) ? WEXITSTATUS(S.job_status) : 128 + WTERMSIG(S.job_status);
            int64_t done = 0, total = 0;
            double t_end = t + 1.0;
            /* its ranks' last lines may still be on the way */
            while (now_mono() < t_end) {
                int open_ = 0;
                for (i = 0; i < S.nr; i++) open_ += R[i].fd >= 0 && R[i].hello && !R[i].bye;
                if (!open_) break;
                for (i = 0; i < S.nr; i++) {
                    rankc *c = &R[i];
                    char buf[4096];
                    ssize_t k;
                    if (c->fd < 0) continue;
                    k = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
                    if (k > 0) {
                        if (rank_bytes(c, buf, (size_t)k, t) < 0) close_rank(c);
                    } else if (k == 0) close_rank(c);
                }
                nap(0.02);
            }
            for (i = 0; i < S.nr; i++)
                if (R[i].hello) {
                    any_hello = 1;
                    all_bye &= R[i].bye;
                    if (R[i].done > done) done = R[i].done;
                    if (R[i].total > total) total = R[i].total;
                }
            if (code == 0 && any_hello && all_bye) return S.stop_sig ? OUT_STOPPED : OUT_FINISHED;
            if (code == 0 && !any_hello) return OUT_FINISHED; /* a trainer without the harness's channel */
            {
                failure *f = &F[S.nf];
                if (!f->has_fault) memset(f, 0, sizeof *f);
                f->t_detect = now_wall();
                snprintf(f->what, sizeof f->what, "launcher_exited");
                snprintf(f->detail, sizeof f->detail, "%s exited with status %d%s", S.mpirun, code, all_bye && any_hello ? " after every rank said goodbye" : "");
                if (!f->has_fault) f->rank = -1, f->host[0] = 0, f->step = done;
                if (S.attempt == 1 && done == 0 && all_bye) return OUT_CONFIG; /* the trainer refused to start: not a failure to restart */
                if (S.attempt == 1 && !any_hello && code != 0) return OUT_CONFIG;
            }
            return OUT_FAILED;
        }
    }
}

/* the state letter of pid (from /proc/PID/stat: R, S, D, T, Z ...), or 0 when there is no such process */
static char proc_state(long pid) {
    char path[64], buf[1024], *rp, st = 0;
    FILE *f;
    size_t n;
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    if (!(f = fopen(path, "r"))) return 0;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    if ((rp = strrchr(buf, ')')) != NULL && sscanf(rp + 1, " %c", &st) != 1) st = 0; /* after "(comm)", which may hold anything */
    return st;
}
static int proc_alive(pid_t pid) { /* runs (a zombie does not) */
    char st = proc_state((long)pid);
    return st && st != 'Z' && st != 'X';
}
/* the parent of pid (from /proc/PID/stat), or -1 */
static long parent_of(long pid) {
    char path[64], buf[1024], *rp;
    long pp = -1;
    FILE *f;
    size_t n;
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    if (!(f = fopen(path, "r"))) return -1;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    if ((rp = strrchr(buf, ')')) != NULL && sscanf(rp + 1, " %*c %ld", &pp) != 1) pp = -1; /* after "(comm)", which may hold anything */
    return pp;
}
/* whether pid is verifiably a process of this job: a descendant of the mpirun ptrun started, or one
   whose environment (as it was exec'd) holds PTRAIN_SUPERVISOR_ID=this run's id */
static int ours(pid_t pid) {
    char path[64], want[64];
    long p = pid;
    int depth;
    FILE *f;
    if (pid <= 1 || pid == getpid()) return 0;
    for (depth = 0; depth < 64 && p > 1; depth++) {
        if (S.job > 0 && !S.job_done && p == (long)S.job) return 1;
        p = parent_of(p);
    }
    snprintf(path, sizeof path, "/proc/%ld/environ", (long)pid);
    snprintf(want, sizeof want, "PTRAIN_SUPERVISOR_ID=%s", S.launch_id);
    if ((f = fopen(path, "r")) != NULL) {
        char e[4096];
        size_t n = 0;
        int ch, found = 0;
        while ((ch = getc(f)) != EOF) { /* NUL-separated entries */
            if (ch) {
                if (n < sizeof e - 1) e[n] = (char)ch;
                n++;
                continue;
            }
            if (n < sizeof e - 1) e[n] = 0;
            if (n < sizeof e - 1 && !strcmp(e, want)) found = 1;
            n = 0;
            if (found) break;
        }
        fclose(f);
        return found;
    }
    return 0;
}

/* the whole job goes, on every host; returns the ranks still connected afterwards */
static int teardown(void) {
    double t0 = now_mono();
    int i, left = 0;
    pid_t kp[MAXR];
    int ok[MAXR], nk = 0;
    send_all("abort\n");
    if (S.job > 0 && !S.job_done) kill(-S.job, SIGTERM);
    while (now_mono() - t0 < 3.0) {
        reap_job(0);
        if (S.job_done) break;
        nap(0.02);
    }
    if (!S.job_done && S.job > 0) kill(-S.job, SIGKILL), reap_job(1);
    /* every rank's process, wherever it is (a stopped one ignores the rest): on this machine only a
       process that is verifiably one of this job's; on another host through the agent, whose fixed
       command checks the process's environment for this run's id before the kill */
    for (i = 0; i < S.nr; i++) {
        rankc *c = &R[i];
        char cmd[256];
        if (!c->hello || c->pid <= 0) continue;
        if (!c->thost[0]) {
            if (ours((pid_t)c->pid)) kill((pid_t)c->pid, SIGKILL);
            else if (proc_alive((pid_t)c->pid)) say("rank %d's pid %ld is not a process of this job (neither under its mpirun nor with its id): not signalled", c->rank, c->pid);
        } else if (nk < MAXR) { /* through the remote shell; a host that does not answer: its lease ends the rank */
            snprintf(cmd, sizeof cmd, "tr '\\000' '\\n' </proc/%ld/environ 2>/dev/null | grep -qx PTRAIN_SUPERVISOR_ID=%s && kill -9 %ld 2>/dev/null", c->pid, S.launch_id, c->pid);
            kp[nk++] = remote(c->thost, cmd);
        }
    }
    wait_all(kp, ok, nk, now_mono() + S.probe_timeout);
    /* the channels close as the processes go */
    while (now_mono() - t0 < 5.0) {
        left = 0;
        for (i = 0; i < S.nr; i++) {
            rankc *c = &R[i];
            char b[512];
            if (c->fd < 0) continue;
            if (recv(c->fd, b, sizeof b, MSG_DONTWAIT) == 0) close_rank(c);
            else left++;
        }
        if (!left) break;
        nap(0.02);
    }
    for (i = 0; i < S.nr; i++) close_rank(&R[i]);
    S.nr = 0;
    return left;
}

/* ---- the channel's secret and address --------------------------------------------------------- */
static int hex_random(char *out, size_t nbytes, char *err, size_t errlen) { /* 2 x nbytes hex digits of the system's randomness */
    unsigned char b[32];
    size_t got = 0, i;
    if (nbytes > sizeof b) return -1;
#if defined(__linux__)
    while (got < nbytes) {
        ssize_t k = getrandom(b + got, nbytes - got, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
#endif
    if (got < nbytes) { /* no getrandom: /dev/urandom */
        int fd = open("/dev/urandom", O_RDONLY);
        got = 0;
        while (fd >= 0 && got < nbytes) {
            ssize_t k = read(fd, b + got, nbytes - got);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) break;
            got += (size_t)k;
        }
        if (fd >= 0) close(fd);
    }
    if (got < nbytes) return snprintf(err, errlen, "no randomness for the channel's secret (getrandom and /dev/urandom failed: %s)", strerror(errno)), -1;
    for (i = 0; i < nbytes; i++) sprintf(out + 2 * i, "%02x", b[i]);
    return 0;
}
static int make_secret(char *err, size_t errlen) { /* 128 bits of secret, 64 of id */
    if (hex_random(S.secret, 16, err, errlen) || hex_random(S.launch_id, 8, err, errlen)) return -1;
    return 0;
}
/* the address to listen on and the one the ranks dial: --listen / --advertise; else 127.0.0.1 when
   every host is this machine; else the address of this machine's interface that routes to the
   hostfile's other hosts (they must all be reached through one) */
static int choose_listen(char *err, size_t errlen) {
    int i, remote_n = 0;
    char via[64] = "", via_host[256] = "";
    struct in_addr a4;
    if (S.listen_addr) {
        if (inet_pton(AF_INET, S.listen_addr, &a4) != 1) return snprintf(err, errlen, "--listen expects an IPv4 address, found '%s'", S.listen_addr), -1;
        snprintf(S.listen_ip, sizeof S.listen_ip, "%s", S.listen_addr);
    } else {
        for (i = 0; i < S.nhosts; i++) {
            const char *name = strchr(S.hosts[i].name, '@') ? strchr(S.hosts[i].name, '@') + 1 : S.hosts[i].name;
            struct addrinfo hints, *res = NULL, *a;
            char src[64] = "";
            if (is_local(name)) continue;
            remote_n++;
            memset(&hints, 0, sizeof hints);
            hints.ai_family = AF_INET, hints.ai_socktype = SOCK_DGRAM;
            if (getaddrinfo(name, "9", &hints, &res) != 0 || !res)
                return snprintf(err, errlen, "host %s of %s does not resolve to an IPv4 address: cannot tell which interface reaches it (give --listen ADDR)", name,
                                S.hostfile), -1;
            for (a = res; a && !src[0]; a = a->ai_next) { /* the source address of a route to it: connect() a UDP socket (nothing is sent) */
                struct sockaddr_in me;
                socklen_t ml = sizeof me;
                int fd = socket(AF_INET, SOCK_DGRAM, 0);
                if (fd < 0) continue;
                if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 && getsockname(fd, (struct sockaddr *)&me, &ml) == 0) inet_ntop(AF_INET, &me.sin_addr, src, sizeof src);
                close(fd);
            }
            freeaddrinfo(res);
            if (!src[0]) return snprintf(err, errlen, "no route from this machine to host %s of %s (give --listen ADDR)", name, S.hostfile), -1;
            if (!via[0]) snprintf(via, sizeof via, "%s", src), snprintf(via_host, sizeof via_host, "%s", name);
            else if (strcmp(via, src))
                return snprintf(err, errlen, "the hosts of %s are reached through different interfaces (%s for %s, %s for %s): give --listen ADDR "
                                             "(0.0.0.0: every interface) and --advertise NAME (what every host can dial)", S.hostfile, via, via_host, src, name), -1;
        }
        snprintf(S.listen_ip, sizeof S.listen_ip, "%s", remote_n ? via : "127.0.0.1");
    }
    /* what the ranks dial */
    if (S.advertise) snprintf(S.adv, sizeof S.adv, "%s", S.advertise);
    else if (strcmp(S.listen_ip, "0.0.0.0")) snprintf(S.adv, sizeof S.adv, "%s", S.listen_ip);
    else snprintf(S.adv, sizeof S.adv, "%s", S.me);
    if (inet_pton(AF_INET, S.adv, &a4) != 1) { /* a name: it must resolve here (the ranks resolve it on their hosts) */
        struct addrinfo hints, *res = NULL;
        int rc;
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_INET, hints.ai_socktype = SOCK_STREAM;
        if ((rc = getaddrinfo(S.adv, NULL, &hints, &res)) != 0)
            return snprintf(err, errlen, "the name the ranks would dial, '%s'%s, does not resolve (%s): give --advertise ADDR, an address every host reaches",
                            S.adv, S.advertise ? " (--advertise)" : " (this host's name)", gai_strerror(rc)), -1;
        freeaddrinfo(res);
    }
    return 0;
}

static const char usage_text[] =
    "usage: ptrun [flags] -- TRAINER [ARGS...]\n"
    "  --hosts FILE          Open MPI hostfile (HOST slots=N), re-read at each restart (default: this machine, slots for --dp x --tp x --pp)\n"
    "  --max-restarts N      failures survived before giving up (3)\n"
    "  --backoff S           wait before the first relaunch, doubled each time, at most 30 s (1)\n"
    "  --timeout PHASE=S     a fixed hang timeout for setup, step, ckpt or eval (setup: 300; the others calibrated)\n"
    "  --timeout-floor S     the least calibrated timeout: 5 x the longest step / save / evaluation seen (30)\n"
    "  --lease S             a rank that hears nothing from ptrun for S s exits by itself (10)\n"
    "  --listen ADDR         the IPv4 address the ranks' channels come to (default: 127.0.0.1 when every host is this\n"
    "                        machine, else the address of the interface that routes to the hostfile's hosts; 0.0.0.0: any)\n"
    "  --advertise HOST      the name or address the ranks dial (default: the listening address; with 0.0.0.0, this host's name)\n"
    "  --mpirun CMD          the launcher (mpirun)\n"
    "  --mpi-arg ARG         one more argument for the launcher (repeat it), e.g. --mpi-arg --oversubscribe\n"
    "  --agent CMD           the remote shell that probes hosts and kills left-over ranks (default: the launcher's\n"
    "                        --mca plm_rsh_agent among --mpi-arg, else ssh)\n"
    "  --probe-timeout S     a host that does not answer within S s is left out (5)\n"
    "  -x NAME               an environment variable forwarded to the ranks (PTRAIN_* and OMP_* always are)\n"
    "  --events FILE         ptrun's events as JSON lines (default: CKPT_DIR/ptrun_events.jsonl)\n";

/* ---- the steps of main ---- */

static int flag_max_restarts(void *dst, const char *tool, const char *flag, const char *v) {
    double x;
    if (ptf_real(tool, flag, v, 0, 1000, 0, NULL, &x)) return 2;
    *(int *)dst = (int)x;
    return 0;
}
static int flag_timeout(void *dst, const char *tool, const char *flag, const char *v) { /* PHASE=SECONDS */
    int p;
    double x;
    const char *eq = strchr(v, '=');
    (void)dst;
    for (p = 0; p < PH_N && !(eq && (size_t)(eq - v) == strlen(phase_name[p]) && !strncmp(v, phase_name[p], (size_t)(eq - v))); p++) {}
    if (p == PH_N) return ptf_bad(tool, flag, "PHASE=SECONDS with PHASE setup, step, ckpt or eval", v);
    if (ptf_real(tool, flag, eq + 1, 0.1, 1e6, 0, NULL, &x)) return 2;
    if (p == PH_SETUP) S.setup_s = x;
    else S.fixed[p] = x;
    return 0;
}
static int flag_mpi_arg(void *dst, const char *tool, const char *flag, const char *v) { /* --mpi-arg, -x: up to 60 each */
    int *n = dst == (void *)S.mpi_args ? &S.nmpi : &S.nx;
    if (*n == 60) return fprintf(stderr, "%s: at most 60 %s\n", tool, flag), 2;
    ((const char **)dst)[(*n)++] = v;
    return 0;
}

/* parse_flags: ptrun's flags into S, the trainer's command after "--"; PTF_GO, or the exit status */
static int parse_flags(int argc, char **argv) {
    int rc, rest = 0;
    const ptf_flag flags[] = {PTF_STR("--hosts", &S.hostfile),
                              PTF_FN("--max-restarts", flag_max_restarts, &S.max_restarts),
                              PTF_REAL("--backoff", &S.backoff, 0, 3600),
                              PTF_REAL("--timeout-floor", &S.floor_s, 0.1, 1e6),
                              PTF_REAL("--lease", &S.lease, 0.5, 1e6),
                              PTF_REAL("--probe-timeout", &S.probe_timeout, 0.1, 3600),
                              PTF_FN("--timeout", flag_timeout, NULL),
                              PTF_STR("--listen", &S.listen_addr),
                              PTF_STR("--advertise", &S.advertise),
                              PTF_STR("--mpirun", &S.mpirun),
                              PTF_STR("--agent", &S.agent),
                              PTF_STR("--events", &S.events_path),
                              PTF_FN("--mpi-arg", flag_mpi_arg, S.mpi_args),
                              PTF_FN("-x", flag_mpi_arg, S.xvars),
                              PTF_REST(&rest),
                              PTF_END};
    S.mpirun = "mpirun", S.backoff = 1, S.probe_timeout = 5, S.floor_s = 30, S.lease = 10, S.setup_s = 300, S.max_restarts = 3, S.lfd = -1;
    if ((rc = ptf_parse("ptrun", usage_text, flags, argc, argv)) != PTF_GO) return rc;
    if (rest) S.targv = argv + rest, S.targc = argc - rest;
    if (!S.targv || S.targc < 1) {
        fprintf(stderr, "ptrun: no trainer command (expected: ptrun [flags] -- TRAINER [ARGS...])\n");
        fputs(usage_text, stderr);
        return 2;
    }
    return PTF_GO;
}

/* read_layout: the trainer's layout, checkpoints and log from its flags, the hostfile, and the
   first launch's DP; PTF_GO, or the exit status after the message */
static int read_layout(void) {
    char err[1024], names[2048];
    int slots;
    S.ckpt_dir = targ("--ckpt-dir"), S.log_path = targ("--log");
    if (!S.ckpt_dir) {
        fprintf(stderr, "ptrun: the trainer command has no --ckpt-dir: after a failure the job could only begin again at step 0, every step lost. "
                        "Give it --ckpt-dir DIR and --ckpt-every N (a restart resumes from the newest checkpoint in DIR)\n");
        return 2;
    }
    if (!targ("--ckpt-every")) say("warning: the trainer has no --ckpt-every: it saves only at the end, so a restart begins again at step 0");
    S.tp = targ_int("--tp", 1), S.pp = targ_int("--pp", 1), S.accum0 = targ_int("--accum", 1), S.dp0 = targ_int("--dp", 0);
    if (S.tp < 1 || S.pp < 1 || S.accum0 < 1 || S.dp0 < 0) return fprintf(stderr, "ptrun: the trainer's --tp, --pp, --accum must be >= 1 and --dp >= 0\n"), 2;
    gethostname(S.me, sizeof S.me - 1);
    if (read_hosts(err, sizeof err)) return fprintf(stderr, "ptrun: %s\n", err), 2;
    if (!S.hostfile) {
        if (!S.dp0) return fprintf(stderr, "ptrun: without --hosts give the trainer --dp (the job's size on this machine)\n"), 2;
        S.hosts[0].slots = S.dp0 * S.tp * S.pp;
    }
    slots = healthy_slots(names, sizeof names);
    if (!S.dp0) S.dp0 = slots / (S.tp * S.pp);
    if (S.dp0 < 1 || S.dp0 * S.tp * S.pp > slots) {
        fprintf(stderr, "ptrun: the hostfile %s has %d slots (%s), too few for dp %d x tp %d x pp %d\n", S.hostfile ? S.hostfile : "(none)", slots, names,
                S.dp0 > 0 ? S.dp0 : 1, S.tp, S.pp);
        return 2;
    }
    return PTF_GO;
}

/* open_events: CKPT_DIR made, the events file opened (a warning when it cannot be) */
static void open_events(void) {
    char ep[1200];
    mkdir(S.ckpt_dir, 0755);
    if (!S.events_path) snprintf(ep, sizeof ep, "%s/ptrun_events.jsonl", S.ckpt_dir), S.events_path = strdup(ep);
    if (!(S.events = fopen(S.events_path, "a"))) say("cannot write the events to %s: %s", S.events_path, strerror(errno));
}

/* read_faults: PTRAIN_FAULT, as the ranks will read it: remembered so a fault that fired is not passed again */
static void read_faults(void) {
    const char *fv = getenv("PTRAIN_FAULT");
    while (fv && *fv && S.nfaults < MAXFAULT) {
        fault_entry *e = &S.faults[S.nfaults];
        size_t n = strcspn(fv, ",");
        char *c1, *last;
        if (n >= sizeof e->text) n = sizeof e->text - 1;
        memcpy(e->text, fv, n), e->text[n] = 0;
        fv += n + (fv[n] == ',');
        memcpy(e->kind, e->text, sizeof e->kind - 1), e->kind[sizeof e->kind - 1] = 0;
        if ((c1 = strchr(e->kind, ':')) != NULL) *c1 = 0;
        last = strrchr(e->text, ':');
        e->rank = last && last[1] != '*' ? atoi(last + 1) : -1;
        if (last) {
            char *s2 = last - 1;
            while (s2 > e->text && *s2 != ':') s2--;
            e->step = strtoll(s2 + 1, NULL, 10);
        }
        S.nfaults++;
    }
}

/* open_channel: this run's secret and id, the listening socket the ranks dial, the signal pipe and
   handlers; PTF_GO, or the exit status after the message */
static int open_channel(void) {
    char err[1024];
    struct sockaddr_in addr;
    socklen_t alen = sizeof addr;
    struct sigaction sa;
    int one = 1;
    if (make_secret(err, sizeof err) != 0) return fprintf(stderr, "ptrun: %s\n", err), 1;
    if (choose_listen(err, sizeof err) != 0) return fprintf(stderr, "ptrun: %s\n", err), 2;
    S.lfd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET, addr.sin_port = 0;
    inet_pton(AF_INET, S.listen_ip, &addr.sin_addr);
    if (S.lfd >= 0) setsockopt(S.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (S.lfd < 0 || bind(S.lfd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(S.lfd, 256) != 0 ||
        getsockname(S.lfd, (struct sockaddr *)&addr, &alen) != 0)
        return fprintf(stderr, "ptrun: cannot listen for the ranks' channels on %s: %s\n", S.listen_ip, strerror(errno)), 1;
    S.port = ntohs(addr.sin_port);
    fcntl(S.lfd, F_SETFD, FD_CLOEXEC);
    if (pipe(S.sigpipe) != 0) return 1;
    fcntl(S.sigpipe[0], F_SETFL, O_NONBLOCK), fcntl(S.sigpipe[1], F_SETFL, O_NONBLOCK);
    fcntl(S.sigpipe[0], F_SETFD, FD_CLOEXEC), fcntl(S.sigpipe[1], F_SETFD, FD_CLOEXEC);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL), sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return PTF_GO;
}

/* note_failure: the failure of this attempt: which attempt, its layout, the steps done */
static void note_failure(failure *f) {
    int j;
    f->attempt = S.attempt, f->dp_from = S.dp, f->accum_from = S.accum;
    for (j = 0, f->done = 0; j < S.nr; j++)
        if (R[j].hello && R[j].done > f->done) f->done = R[j].done;
}

/* tear_down_failed: the failure said and logged, the job torn down */
static void tear_down_failed(failure *f) {
    char h[2100], d[2048], lat[64] = "";
    int left;
    say("%s: %s%s%s", !strcmp(f->what, "hung") ? "hang" : !strcmp(f->what, "died") ? "death" : "failure", f->detail,
        f->has_fault ? "; injected " : "", f->has_fault ? f->kind : "");
    if (f->has_fault) say("detected %.2f s after the fault", f->t_detect - f->t_fault);
    if (f->has_fault) snprintf(lat, sizeof lat, ",\"latency_s\":%.3f", f->t_detect - f->t_fault); /* from the fault's own timestamp */
    event("ptrun_detected", f->step, f->t_detect, "\"rank\":%d,\"host\":\"%s\",\"what\":\"%s\",\"detail\":\"%s\"%s", f->rank,
          jstr(f->host, h, sizeof h), f->what, jstr(f->detail, d, sizeof d), lat);
    left = teardown();
    f->t_down = now_wall();
    say("torn down in %.2f s%s", f->t_down - f->t_detect, left ? " (some ranks did not close their channel: their lease ends them)" : "");
    event("ptrun_teardown", f->step, f->t_down, "\"seconds\":%.3f,\"left\":%d", f->t_down - f->t_detect, left);
}

/* plan_restart: before restart number `restarts`: the hostfile again, the hosts that answer, the
   largest DP that fits (waiting the backoff while none does); then the backoff and the new layout in
   S. 0 to relaunch, 1 when a signal stopped the run */
static int plan_restart(failure *f, int restarts) {
    char err[1024], names[2048];
    double wait = S.backoff;
    int k, slots, dp = 0;
    for (k = 1; k < restarts; k++) wait *= 2;
    if (wait > 30) wait = 30;
    for (;;) {
        if (read_hosts(err, sizeof err)) say("%s (the hostfile as it was is used)", err);
        if (!S.hostfile) S.hosts[0].slots = S.dp0 * S.tp * S.pp;
        probe();
        slots = healthy_slots(names, sizeof names);
        dp = pick_dp(slots);
        if (dp >= 1) break;
        say("no layout fits %d healthy slots (%s) for tp %d x pp %d; trying again in %.1f s", slots, names, S.tp, S.pp, wait);
        nap(wait);
        if (S.stop_sig) break;
    }
    if (S.stop_sig || dp < 1) return 1;
    f->dp_to = dp, f->accum_to = S.dp0 * S.accum0 / dp;
    f->resume = latest_step() < 0 ? 0 : latest_step();
    say("restart %d/%d after %s%s%s%s %s at step %lld; dp %d -> %d, accum %d -> %d, resuming from step %lld (after %.1f s)", restarts,
        S.max_restarts, f->rank >= 0 ? "rank " : "", f->rank >= 0 ? (snprintf(err, sizeof err, "%d", f->rank), err) : "the launcher",
        f->host[0] ? " on host " : "", f->host, !strcmp(f->what, "launcher_exited") ? "exited" : f->what, (long long)f->done, S.dp, dp, S.accum,
        f->accum_to, (long long)f->resume, wait);
    nap(wait);
    S.dp = dp, S.accum = f->accum_to;
    f->t_relaunch = now_wall();
    S.attempt++; /* the events of the relaunch belong to it */
    event("ptrun_relaunch", f->resume, f->t_relaunch,
          "\"restart\":%d,\"max_restarts\":%d,\"dp_from\":%d,\"dp\":%d,\"accum_from\":%d,\"accum\":%d,\"tp\":%d,\"pp\":%d,\"resume_step\":%lld,\"backoff_s\":%.3f",
          restarts, S.max_restarts, f->dp_from, dp, f->accum_from, f->accum_to, S.tp, S.pp, (long long)f->resume, wait);
    S.attempt--;
    return 0;
}

/* run_job: launch, supervise; after a failure tear down and relaunch on what is left, within the
   restart budget. The outcome (OUT_*); *restarts: the relaunches */
static int run_job(int *restarts) {
    int out = OUT_FAILED;
    char hosts[2048], h[2100];
    S.t_start = now_wall();
    S.dp = S.dp0, S.accum = S.accum0;
    for (S.attempt = 1;; S.attempt++) {
        failure *f;
        if (launch(hosts, sizeof hosts) != 0) break;
        say("%s %d: %s on %s, dp %d x tp %d x pp %d, accum %d, %d ranks; channels at %s:%d (listening on %s)", S.attempt == 1 ? "launch" : "relaunch", S.attempt,
            S.targv[0], hosts, S.dp, S.tp, S.pp, S.accum, S.dp * S.tp * S.pp, S.adv, S.port, S.listen_ip);
        event("ptrun_launch", S.attempt == 1 ? 0 : latest_step() < 0 ? 0 : latest_step(), now_wall(),
              "\"dp\":%d,\"tp\":%d,\"pp\":%d,\"accum\":%d,\"hosts\":\"%s\",\"np\":%d", S.dp, S.tp, S.pp, S.accum, jstr(hosts, h, sizeof h),
              S.dp * S.tp * S.pp);
        out = supervise();
        if (out == OUT_FINISHED || out == OUT_STOPPED) {
            teardown(); /* nothing is left, but make sure */
            break;
        }
        note_failure(f = &F[S.nf]);
        if (out == OUT_CONFIG) {
            say("the job failed before its first step (%s): not restarting, the trainer's messages above say why", f->detail);
            teardown();
            break;
        }
        tear_down_failed(f);
        S.nf++;
        if (S.stop_sig) return OUT_STOPPED;
        if (*restarts >= S.max_restarts) {
            say("the restart budget (%d) is spent: stopping", S.max_restarts);
            break;
        }
        (*restarts)++;
        if (plan_restart(f, *restarts)) return OUT_STOPPED;
    }
    return out;
}

/* report: each failure, the totals, the end event; the events into the trainer's log; the files
   closed. The exit status: 0 finished, 128+N stopped by signal N, else 1 */
static int report(int out, int restarts) {
    double lost_t = 0;
    int64_t lost_s = 0;
    char line[2048], hf[512];
    int i, code = out == OUT_FINISHED ? 0 : out == OUT_STOPPED ? 128 + (S.stop_sig ? S.stop_sig : SIGTERM) : 1;
    for (i = 0; i < S.nf; i++) {
        failure *f = &F[i];
        double t0 = f->has_fault ? f->t_fault : f->t_detect;
        double end = f->t_recovered > 0 ? f->t_recovered : f->t_down;
        lost_t += end - t0, lost_s += f->done - f->resume;
        say("failure %d: attempt %d, %s%s%s at step %lld: %s; detected after %.2f s, torn down after %.2f s, %s", i + 1, f->attempt,
            f->has_fault ? "injected " : "", f->has_fault ? f->kind : f->what, f->has_fault ? "" : "", (long long)f->done, f->detail, f->t_detect - t0,
            f->t_down - t0,
            f->t_recovered > 0 ? (snprintf(line, sizeof line, "recovered after %.2f s (dp %d -> %d, %lld steps lost)", f->t_recovered - t0, f->dp_from,
                                           f->dp_to, (long long)(f->done - f->resume)),
                                  line)
                               : "not recovered");
    }
    say("%s: %d failure(s), %d restart(s), %lld step(s) lost, %.1f s lost, %.1f s in all", out == OUT_FINISHED ? "finished" : out == OUT_STOPPED ? "stopped" : "gave up",
        S.nf, restarts, (long long)lost_s, lost_t, now_wall() - S.t_start);
    event("ptrun_end", S.nf ? F[S.nf - 1].done : 0, now_wall(), "\"ok\":%s,\"restarts\":%d,\"steps_lost\":%lld,\"time_lost_s\":%.3f,\"exit\":%d",
          out == OUT_FINISHED ? "true" : "false", restarts, (long long)lost_s, lost_t, code);
    if (S.log_path && S.evn) { /* into the trainer's log, now that no rank writes it */
        FILE *lf = fopen(S.log_path, "a");
        if (lf) fwrite(S.evbuf, 1, S.evn, lf), fclose(lf);
    }
    snprintf(hf, sizeof hf, "%s/.ptrun.%ld.hosts", S.ckpt_dir, (long)getpid());
    unlink(hf);
    if (S.events) fclose(S.events);
    return code;
}

int main(int argc, char **argv) {
    int rc, restarts = 0;
    if ((rc = parse_flags(argc, argv)) != PTF_GO || (rc = read_layout()) != PTF_GO) return rc;
    open_events();
    read_faults();
    if ((rc = open_channel()) != PTF_GO) return rc;
    rc = run_job(&restarts);
    return report(rc, restarts);
}
