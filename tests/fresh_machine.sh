#!/bin/sh
# tests/fresh_machine.sh [LOG_DIR] - the README's set-up on a fresh Debian 12 machine (make soak; 95
# minutes on 2 busy cores: debootstrap 3, make demo 31, make test 60). Builds a minimal bookworm root (debootstrap --variant=minbase
# --include=make,gcc,g++,git; debootstrap is installed with apt-get if missing) from this machine's own
# Debian mirror (the bookworm entries of /etc/apt/sources.list and sources.list.d/*.list / *.sources,
# deb822 included, copied into the root with the apt.conf.d files that set Acquire:: options, so its
# apt-get uses the same mirror), clones the committed `main` of this repository into /root/ptrain there
# (git clone: only committed work), and runs the README's set-up commands, `make serve` (first, on the
# bare root: it must install what it needs; checked by asking the server it starts), `make demo` and
# `make test`, as root in a chroot with /proc, /sys and /dev (with /dev/pts and /dev/shm) mounted, in
# a clean environment (env -i: HOME, PATH, USER, LOGNAME, SHELL, LANG, TERM; http(s)_proxy if set),
# exactly as a new user types them. Prints each command's exit status, wall time and last output
# line, a PASS/FAIL per command and "N passed, N failed"; exit 1 if either failed.
# Logs: LOG_DIR (default build/fresh_machine): debootstrap.log, make_demo.log, make_test.log,
# summary.txt, and the root's build/**/*.log and the demo's log.jsonl under LOG_DIR/build/.
# Cleans up on any exit (also Ctrl-C / SIGTERM): ends the processes running in the root, unmounts
# everything under it, and removes it unless KEEP_ROOT=1 (never while anything is still mounted there).
# Env: KEEP_ROOT=1, FRESH_SERVE_ONLY=1 (make serve alone), FRESH_TMP (where the root is made; default /var/tmp), FRESH_BRANCH (default main).
# Where it cannot run (not root, no debootstrap, mount or chroot, no mirror in the apt sources, the
# mirror unreachable) it prints a SKIP line and "0 passed, 0 failed" and exits 0.
set -u
cd "$(dirname "$0")/.." || exit 1
REPO=$(git rev-parse --show-toplevel 2>/dev/null) || REPO=$(pwd)
LOGS=${1:-build/fresh_machine}
case $LOGS in /*) ;; *) LOGS=$(pwd)/$LOGS ;; esac
SUITE=bookworm
BRANCH=${FRESH_BRANCH:-main}
# the README's commands ("Three commands"), as a new user types them
CMD0="make serve"
SERVE_PORT=18779
CMD1="make demo"
CMD2="make test"
SANE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
PATH=$SANE_PATH:$PATH
export PATH

NP=0
NF=0
ROOT=""
pass() { NP=$((NP + 1)); echo "PASS $1"; }
fail() { NF=$((NF + 1)); echo "FAIL $1"; }
say() { echo "fresh_machine: $*"; }
skip() {
    echo "SKIP fresh_machine: $*"
    echo "0 passed, 0 failed"
    exit 0
}
# hms SECONDS: "12m 03s"
hms() { printf '%dm %02ds' $(($1 / 60)) $(($1 % 60)); }

# ---- can it run here? ----
[ "$(id -u)" = 0 ] || skip "needs root (debootstrap, mount, chroot); run as root: sh tests/fresh_machine.sh"
command -v git >/dev/null 2>&1 || skip "git not found"
git -C "$REPO" rev-parse -q --verify "refs/heads/$BRANCH" >/dev/null 2>&1 ||
    skip "no branch $BRANCH in $REPO"
if ! command -v debootstrap >/dev/null 2>&1; then
    say "installing debootstrap (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null 2>&1 ||
        { DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null 2>&1; }
    command -v debootstrap >/dev/null 2>&1 || skip "debootstrap missing and apt-get install debootstrap failed"
fi
command -v chroot >/dev/null 2>&1 || skip "chroot not found"
chroot / /bin/true 2>/dev/null || skip "chroot does not run here (no CAP_SYS_CHROOT?)"
mkdir -p "${FRESH_TMP:-/var/tmp}" || skip "cannot make ${FRESH_TMP:-/var/tmp}"
t=$(mktemp -d "${FRESH_TMP:-/var/tmp}/ptrain-mnt.XXXXXX") || skip "mktemp failed in ${FRESH_TMP:-/var/tmp}"
if mount -t tmpfs fresh_probe "$t" 2>/dev/null; then
    umount "$t"
    rmdir "$t"
else
    rmdir "$t"
    skip "mount does not run here (no CAP_SYS_ADMIN?)"
fi

# ---- this machine's Debian mirror ----
# deb_sources: the bookworm entries of the apt sources, as the two files to copy into the root:
# one-line entries to $1.list, deb822 stanzas to $1.sources (disabled ones and other suites left out)
deb_sources() {
    : >"$1.list"
    : >"$1.sources"
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        # deb [opts] URI SUITE COMPONENT...
        awk -v s="$SUITE" '$1 == "deb" {
            i = 2
            if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
            if ($(i + 1) == s || index($(i + 1), s "-") == 1 || index($(i + 1), s "/") == 1) print }' "$f" >>"$1.list"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        # a stanza (paragraphs split by blank lines) of Types: deb with a Suites: word of the release
        awk -v s="$SUITE" 'function flush() {
                if (st != "" && deb && suite && !off) printf "%s\n", st
                st = ""; deb = 0; suite = 0; off = 0 }
            /^[ \t]*$/ { flush(); next }
            { st = st $0 "\n" }
            tolower($1) == "types:" { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
            tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == s || index($i, s "-") == 1 || index($i, s "/") == 1) suite = 1 }
            tolower($1) == "enabled:" && tolower($2) == "no" { off = 1 }
            END { flush() }' "$f" >>"$1.sources"
    done
}
# mirror_uri LIST SOURCES: the URI of the entry for the release itself (suite bookworm), for debootstrap
mirror_uri() {
    u=$(awk -v s="$SUITE" '{ i = 2
            if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
            if ($(i + 1) == s) { print $i; exit } }' "$1")
    [ -n "$u" ] || u=$(awk -v s="$SUITE" 'function flush() { if (uri != "" && suite && !found) { print uri; found = 1 }
                uri = ""; suite = 0 }
            /^[ \t]*$/ { flush(); next }
            tolower($1) == "uris:" { uri = $2 }
            tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == s) suite = 1 }
            END { flush() }' "$2")
    echo "$u"
}

mkdir -p "$LOGS" || exit 1
rm -rf "$LOGS/build" "$LOGS/apt"
rm -f "$LOGS/debootstrap.log" "$LOGS/make_serve.log" "$LOGS/make_demo.log" "$LOGS/make_test.log" "$LOGS/summary.txt"
mkdir -p "$LOGS/apt"
deb_sources "$LOGS/apt/host"
MIRROR=$(mirror_uri "$LOGS/apt/host.list" "$LOGS/apt/host.sources")
[ -n "$MIRROR" ] || skip "no Debian $SUITE entry in /etc/apt/sources.list or /etc/apt/sources.list.d/ (the mirror to debootstrap from)"

# ---- the root, and its clean-up on any exit ----
ROOT=$(mktemp -d "${FRESH_TMP:-/var/tmp}/ptrain-fresh.XXXXXX") || exit 1
ROOT=$(cd "$ROOT" && pwd -P) || exit 1
CHILD=""
# mounts_under: the mount points at or below $ROOT, deepest first
mounts_under() {
    awk -v r="$ROOT" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}
cleanup() {
    trap '' INT TERM HUP
    # the command running now (its own process group: setsid), then whatever still runs in the root
    [ -n "$CHILD" ] && { kill -s TERM -- "-$CHILD" 2>/dev/null || kill -s TERM "$CHILD" 2>/dev/null; }
    [ -n "$ROOT" ] && [ -d "$ROOT" ] || return
    # the processes running in the root (the chroot's make, mpirun, tests): TERM, then KILL
    for sig in TERM KILL; do
        found=""
        for p in /proc/[0-9]*; do
            [ "$(readlink "$p/root" 2>/dev/null)" = "$ROOT" ] || continue
            kill -s $sig "${p#/proc/}" 2>/dev/null && found=1
        done
        [ -n "$found" ] && [ $sig = TERM ] && sleep 3
    done
    for m in $(mounts_under); do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
    left=$(mounts_under)
    if [ -n "$left" ]; then
        echo "fresh_machine: still mounted, $ROOT left in place:" "$left" >&2
    elif [ "${KEEP_ROOT:-0}" = 1 ]; then
        say "KEEP_ROOT=1: the root stays in $ROOT (chroot $ROOT /bin/bash)"
    else
        rm -rf --one-file-system "$ROOT"
    fi
}
trap 'cleanup' EXIT
trap 'echo "fresh_machine: interrupted" >&2; exit 130' INT
trap 'echo "fresh_machine: terminated" >&2; exit 143' TERM HUP

# bg_wait LOG CMD...: runs CMD (stdin /dev/null, output to LOG) in the background in a process group of
# its own and waits for it (so that a signal reaches the trap at once, and the trap can end the group)
bg_wait() {
    _log=$1
    shift
    setsid -w "$@" </dev/null >"$_log" 2>&1 &
    CHILD=$!
    wait "$CHILD"
    r=$?
    CHILD=""
    return $r
}

# ---- debootstrap ----
say "debootstrap --variant=minbase --include=make,gcc,g++,git $SUITE $ROOT $MIRROR (log: $LOGS/debootstrap.log)"
t0=$(date +%s)
bg_wait "$LOGS/debootstrap.log" debootstrap --variant=minbase --include=make,gcc,g++,git "$SUITE" "$ROOT" "$MIRROR"
rc=$?
dt=$(($(date +%s) - t0))
if [ $rc -ne 0 ]; then
    if grep -q -E "Failed getting release file|Couldn't download|Failure trying to run: .*wget|Temporary failure resolving|unable to resolve" "$LOGS/debootstrap.log"; then
        tail -n 5 "$LOGS/debootstrap.log" | sed 's/^/    /'
        skip "debootstrap could not download from $MIRROR (exit $rc; see $LOGS/debootstrap.log)"
    fi
    echo "FAIL debootstrap (exit $rc after $(hms $dt)); last lines of $LOGS/debootstrap.log:"
    tail -n 15 "$LOGS/debootstrap.log" | sed 's/^/    /'
    echo "0 passed, 3 failed"
    exit 1
fi
say "debootstrap done in $(hms $dt)"

# ---- the same apt mirror and options, name resolution ----
: >"$ROOT/etc/apt/sources.list"
[ -s "$LOGS/apt/host.list" ] && cp "$LOGS/apt/host.list" "$ROOT/etc/apt/sources.list.d/host.list"
[ -s "$LOGS/apt/host.sources" ] && cp "$LOGS/apt/host.sources" "$ROOT/etc/apt/sources.list.d/host.sources"
# keyrings named by Signed-By / signed-by= that the root lacks
for k in $(sed -n -e 's/.*[Ss]igned-[Bb]y[:=] *\([^] ]*\).*/\1/p' "$LOGS/apt/host.list" "$LOGS/apt/host.sources"); do
    case $k in /*) [ -f "$k" ] && [ ! -e "$ROOT$k" ] && mkdir -p "$ROOT${k%/*}" && cp "$k" "$ROOT$k" ;; esac
done
[ -f /etc/apt/apt.conf ] && grep -q 'Acquire' /etc/apt/apt.conf && cp /etc/apt/apt.conf "$ROOT/etc/apt/apt.conf"
for f in /etc/apt/apt.conf.d/*; do
    [ -f "$f" ] && grep -q 'Acquire' "$f" && [ ! -e "$ROOT/etc/apt/apt.conf.d/${f##*/}" ] && cp "$f" "$ROOT/etc/apt/apt.conf.d/"
done
for f in /etc/resolv.conf /etc/hosts; do [ -f "$f" ] && cp -L "$f" "$ROOT$f"; done

# ---- the committed branch ----
if ! git clone -q --no-hardlinks --branch "$BRANCH" "$REPO" "$ROOT/root/ptrain" >"$LOGS/clone.log" 2>&1; then
    echo "FAIL git clone --branch $BRANCH $REPO:"
    sed 's/^/    /' "$LOGS/clone.log"
    echo "0 passed, 3 failed"
    exit 1
fi
say "cloned $BRANCH at $(git -C "$ROOT/root/ptrain" log -1 --format='%h %cd' --date=short) into /root/ptrain"

# ---- /proc, /sys, /dev (its submounts /dev/pts, /dev/shm too), not propagating back ----
mount -t proc proc "$ROOT/proc" &&
    mount --rbind /sys "$ROOT/sys" && mount --make-rslave "$ROOT/sys" &&
    mount --rbind /dev "$ROOT/dev" && mount --make-rslave "$ROOT/dev" ||
    { echo "FAIL mounting /proc, /sys, /dev into $ROOT"; echo "0 passed, 3 failed"; exit 1; }

# ---- the two commands ----
ENVV="HOME=/root USER=root LOGNAME=root SHELL=/bin/sh PATH=$SANE_PATH LANG=C.UTF-8 TERM=dumb"
for v in http_proxy https_proxy no_proxy; do
    eval "x=\${$v:-}"
    [ -n "$x" ] && ENVV="$ENVV $v=$x"
done
SUMMARY=""
# `make serve` first, as a new user may type it: it installs the packages, builds the server, trains the short
# demo (no checkpoint yet) and serves it; once it listens, /health and one completion are asked for (curl of
# this machine: the chroot shares its network), then it is stopped (SIGTERM to its process group: it drains)
log=$LOGS/make_serve.log
say "$CMD0 (in the root's /root/ptrain; log: $log)"
t0=$(date +%s)
# shellcheck disable=SC2086
setsid chroot "$ROOT" /usr/bin/env -i $ENVV /bin/sh -c "cd /root/ptrain && $CMD0 SERVE_ARGS='--port $SERVE_PORT'" </dev/null >"$log" 2>&1 &
CHILD=$!
up=0
while kill -0 "$CHILD" 2>/dev/null && [ $(($(date +%s) - t0)) -lt 5400 ]; do
    grep -q 'ptserve: listening on' "$log" && { up=1; break; }
    sleep 5
done
health="" answer=""
if [ $up = 1 ]; then
    for _ in $(seq 60); do
        health=$(curl -s -m 10 "http://127.0.0.1:$SERVE_PORT/health")
        case $health in *'"ok"'*) break ;; esac
        sleep 1
    done
    answer=$(curl -s -m 120 "http://127.0.0.1:$SERVE_PORT/v1/completions" -H 'Content-Type: application/json' \
        -d '{"prompt":"The","max_tokens":8,"seed":1}')
fi
kill -s TERM -- "-$CHILD" 2>/dev/null
wait "$CHILD"
CHILD=""
dt=$(($(date +%s) - t0))
line="$CMD0: listening $up, /health '$health', $(hms $dt)"
echo "$line"
SUMMARY="$SUMMARY$line
"
case "$health:$answer" in
*'"ok"'*:*'"text"'*) pass "$CMD0 as the first command (built, trained, listened, answered /health and a completion; $(hms $dt))" ;;
*) fail "$CMD0 as the first command: listening $up, /health '$health', completion '$(echo "$answer" | head -c 200)'; last lines of $log:"
    tail -n 15 "$log" | sed 's/^/    /' ;;
esac
# FRESH_SERVE_ONLY=1: only make serve (a quicker check of the first-command path)
CMDS="$CMD1:$CMD2"
[ "${FRESH_SERVE_ONLY:-0}" = 1 ] && CMDS=""
IFS_=$IFS
IFS=:
for cmd in $CMDS; do
    IFS=$IFS_
    log=$LOGS/$(echo "$cmd" | tr ' ' _).log
    say "$cmd (in the root's /root/ptrain; log: $log)"
    t0=$(date +%s)
    # shellcheck disable=SC2086
    bg_wait "$log" chroot "$ROOT" /usr/bin/env -i $ENVV /bin/sh -c "cd /root/ptrain && $cmd"
    rc=$?
    dt=$(($(date +%s) - t0))
    last=$(grep -v '^[[:space:]]*$' "$log" | tail -n 1)
    line="$cmd: exit $rc, $(hms $dt), last line: $last"
    echo "$line"
    SUMMARY="$SUMMARY$line
"
    if [ $rc -eq 0 ]; then pass "$cmd (exit 0, $(hms $dt))"; else
        fail "$cmd: exit $rc after $(hms $dt); last lines of $log:"
        grep -E '^(FAIL |  \[)' "$log" | head -n 40 | sed 's/^/    /'
        tail -n 15 "$log" | sed 's/^/    /'
    fi
done

IFS=$IFS_
# ---- keep the root's logs ----
(cd "$ROOT/root/ptrain" && find build \( -name '*.log' -o -name '*.jsonl' \) -type f -size -20M | tar -cf - -T - 2>/dev/null) |
    (cd "$LOGS" && tar -xf - 2>/dev/null)
{
    echo "debian $SUITE minbase from $MIRROR; $BRANCH $(git -C "$ROOT/root/ptrain" log -1 --format=%h); $(date -u '+%Y-%m-%d %H:%M UTC')"
    printf '%s' "$SUMMARY"
    echo "$NP passed, $NF failed"
} >"$LOGS/summary.txt"
echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]
