#!/bin/sh
# tests/nshosts.sh - several "hosts" on one machine, made of Linux namespaces, for multi-host
# Open MPI jobs without a cluster: the supervisor's fault-tolerance tests (a host dies, a host is
# unreachable, a host comes back) and a class (docs/nshosts.md). POSIX sh; needs root, util-linux
# (unshare, nsenter, findmnt) and iproute2 (ip). No ssh, no /etc/hosts edit, no daemon.
#
# Usage: sh tests/nshosts.sh SUBCOMMAND [ARG...]
#   up N [--net A.B.C] [--prefix P] [--bridge BR]
#         make N hosts (1..9; 2 or 3 in the tests): P1..PN (default pth1..pthN) at A.B.C.11..
#         (default 10.213.0.11..) on the bridge BR (default ptbr0) at A.B.C.1/24 in the root
#         namespace; each host has lo up, eth0 (a veth pair, its other end pthIv on the bridge),
#         its own hostname, a fresh tmpfs on /dev/shm and an /etc/hosts naming every host.
#         Prints the hostfile. Run again with the same settings it only prints the hostfile;
#         with other settings it refuses (exit 3): `down` first.
#   down  kills every process in every host, deletes the veths and the bridge, unmounts and
#         deletes the state; says what is left if anything is (exit 1). Safe to run twice.
#   agent HOST COMMAND...
#         the rsh agent Open MPI calls like ssh (`mpirun --mca plm_rsh_agent STATE/agent`, see
#         mpirun-args): runs the command line (its arguments joined by spaces, read by /bin/sh, as
#         ssh does) in HOST's three namespaces, with a login-like environment (PATH, HOME, USER,
#         LOGNAME, LANG, LD_LIBRARY_PATH kept; nothing else of mpirun's). HOST is a name (pth2)
#         or an address (10.213.0.12). An unknown or cut host fails like an unreachable ssh
#         host: a message on stderr and exit 255, at once.
#   exec HOST COMMAND [ARG...]
#         runs COMMAND (argv, not a shell line) in HOST, in the current directory, with the
#         caller's environment; works on a cut host too (it is the host's console). Exit status:
#         the command's.
#   pids HOST   the pids (one a line) of the processes in HOST: those whose net, uts or mount
#               namespace is HOST's.
#   kill HOST   SIGKILL to every process in HOST, repeated until none is left (a host-level
#               fault: the machine lost its power); prints how many were killed.
#   cut HOST    makes HOST unreachable: its veth down (no packet in or out; open TCP connections
#               hang as on a real partition) and the agent refuses it (exit 255). Its processes
#               keep running.
#   restore HOST   reachable again.
#   hostfile [SLOTS]   an Open MPI hostfile of the hosts that are up and not cut:
#               `ADDR slots=SLOTS` (default 2), addresses as host names.
#   mpirun-args the mpirun options that run a job across the hosts, one line, to be split by the
#               shell: mpirun $(sh tests/nshosts.sh mpirun-args) --hostfile F -np 4 prog
#               plm_rsh_agent STATE/agent: the agent as one word (a wrapper written by up);
#               plm_rsh_no_tree_spawn 1: mpirun starts every orted itself (an orted inside a host
#                 cannot enter another host);
#               orte_leave_session_attached 1: the orteds do not daemonize, each stays the child
#                 of its agent, so mpirun sees a daemon die at any moment (daemonized, one killed
#                 before it has called mpirun back leaves mpirun waiting for ever). Its cost: now
#                 and then a harmless "plm:rsh: Warning: setpgid(...) failed in parent" line;
#               pml ob1, btl tcp,self,vader: TCP between hosts, shared memory within one (no UCX,
#                 which would try shared memory between ranks it cannot tell apart);
#               btl_tcp_if_include/oob_tcp_if_include NET.0/24: the bridge only, not the
#                 machine's other interfaces, for the ranks' traffic and for the daemons'.
#   check       whether namespaces, a bridge and veths can be made here: exit 0, or 77 with a
#               plain message saying why not (tests then skip their multi-host trials).
#   selftest    up 3, down, up 2, Open MPI jobs across the hosts, a host killed under a running
#               job, cut/restore, down; PASS/FAIL lines, timings, "N passed, N failed" last.
#               Uses its own state, bridge, names and subnet (NSHOSTS_STATE=/run/ptrain-nshosts-
#               selftest, ptbr9, pts1.., 10.213.9.0/24), so it can run beside hosts that are up;
#               always tears its hosts down (trap). ~15 s.
# Environment: NSHOSTS_STATE=DIR (default /run/ptrain-nshosts) keeps one set of hosts apart from
# another; every subcommand reads it.
#
# Why three namespaces. `ip netns exec` enters only a network namespace: the processes keep the
# machine's hostname, so Open MPI (which tells nodes apart by hostname, and names its session
# directory /tmp/ompi.HOSTNAME.UID and its shared-memory files after it) would take all the hosts
# for one node. So each host is a network namespace (its own eth0, address, lo, TCP ports), a UTS
# namespace (its own hostname) and a mount namespace (its own /dev/shm tmpfs, where vader keeps its
# segments, and its own /etc/hosts). /tmp, the file systems and the pid space stay shared: a
# program built under /tmp runs on every host (as on a cluster with a shared file system), the
# session directories differ by hostname, and `pids`/`kill` see the hosts' processes from outside.
# The namespaces are persistent: bind mounts of their nsfs files in STATE/NAME/{net,uts,mnt}
# (STATE itself is bound onto itself and made private, which a mount namespace file needs), so a
# host exists with no process in it, and the agent enters it with nsenter. Inside a host STATE is
# unmounted: its plain files (the cut and down marks) are seen, the namespace files are not.
#
# How mpirun reaches the hosts. The hostfile names the hosts by address (10.213.0.11 ...): mpirun,
# in the root namespace, resolves nothing and sees that the address is not one of its own (its
# own on the bridge is .1), so it takes every host for a remote node and starts an orted there
# through the agent, which maps the address to the host. Inside the hosts the names (pth1 ...)
# resolve through the host's own /etc/hosts, a bind mount that lives only in its mount namespace.
#
# Exit codes: 0 success; 1 an operation or a check failed (selftest: a test failed); 2 usage
# (unknown subcommand, bad argument, unknown host); 3 state: not up, or up with other settings,
# or a name/subnet already taken on this machine; 77 check (and up, selftest): namespaces cannot
# be made here (not root, a tool missing, no veth/bridge); 255 agent: host unknown, cut or not up
# (as ssh). exec: the command's status.
set -u

ME=nshosts
SELF=$(cd "$(dirname "$0")" && pwd -P)/$(basename "$0")
STATE=${NSHOSTS_STATE:-/run/ptrain-nshosts}
case $STATE in /*) ;; *) STATE=$(pwd -P)/$STATE ;; esac

die() {
    _c=$1
    shift
    echo "$ME: $*" >&2
    exit "$_c"
}

# the settings of the hosts that are up (config written by up): BRIDGE NET PREFIX HOSTS
load() {
    [ -f "$STATE/config" ] || die 3 "no hosts are up (no $STATE/config); run: sh $SELF up 2"
    . "$STATE/config"
}

# resolve HOST: sets H (name), A (address), D (its state directory); status 1 if unknown
resolve() {
    _i=0
    for _h in $HOSTS; do
        _i=$((_i + 1))
        if [ "$1" = "$_h" ] || [ "$1" = "$NET.$((10 + _i))" ]; then
            H=$_h
            A=$NET.$((10 + _i))
            D=$STATE/$_h
            return 0
        fi
    done
    return 1
}

need_host() {
    [ $# -ge 1 ] || die 2 "usage: sh $SELF $CMD HOST"
    load
    resolve "$1" || die 2 "$1: no such host (hosts: $HOSTS)"
}

# check: can namespaces, a bridge and veths be made here? Silent when yes; the reason on stdout
# and status 77 when not. Tries everything inside a throwaway namespace: touches nothing.
check_env() {
    if [ "$(id -u)" != 0 ]; then
        echo "$ME: not root: network namespaces, veths and a bridge need root (CAP_SYS_ADMIN, CAP_NET_ADMIN)"
        return 77
    fi
    for _t in unshare nsenter ip mount umount findmnt stat find hostname; do
        command -v "$_t" >/dev/null 2>&1 || {
            echo "$ME: $_t not found (packages util-linux, iproute2, mount)"
            return 77
        }
    done
    if ! unshare --help 2>/dev/null | grep -q -- '--net\[=<file>\]'; then
        echo "$ME: this unshare cannot keep a namespace in a file (--net=FILE; util-linux >= 2.27 has it)"
        return 77
    fi
    if ! nsenter --help 2>/dev/null | grep -q -- '--wd'; then
        echo "$ME: this nsenter has no --wd (util-linux >= 2.23 has it)"
        return 77
    fi
    _err=$(unshare --net --uts --mount --propagation private sh -c '
        ip link add nshchk0 type bridge && ip link add nshchk1 type veth peer name nshchk2 &&
        ip link set nshchk1 master nshchk0 && hostname nshchk &&
        mount -t tmpfs nshchk /dev/shm' 2>&1) || {
        echo "$ME: cannot make a namespace with a bridge, a veth, a hostname and a tmpfs here: $_err"
        return 77
    }
    return 0
}

# hostfile lines of the hosts that are up and not cut
hostfile() {
    _slots=${1:-2}
    _i=0
    for _h in $HOSTS; do
        _i=$((_i + 1))
        [ -e "$STATE/$_h/cut" ] || echo "$NET.$((10 + _i)) slots=$_slots"
    done
}

# pids_of DIR: pids of the processes in the host whose state directory is DIR
pids_of() {
    [ "$(stat -f -c %T "$1/net" 2>/dev/null)" = nsfs ] || return 0
    _n=$(stat -c %i "$1/net") _u=$(stat -c %i "$1/uts") _m=$(stat -c %i "$1/mnt")
    find /proc/[0-9]*/ns/ -maxdepth 1 \( -lname "net:\[$_n\]" -o -lname "uts:\[$_u\]" \
        -o -lname "mnt:\[$_m\]" \) 2>/dev/null | cut -d/ -f3 | sort -un
}

# kill_in DIR: SIGKILL to every process of the host until none is left; prints the count. While
# it runs the host is marked down: an agent already on its way in sees the mark once inside (see
# do_agent) and leaves, so a daemon being launched at that moment cannot slip past the kill. The
# host takes new logins again when it returns (a machine that rebooted at once).
kill_in() {
    _k=0
    _tries=0
    _empty=0
    : >"$1/down" 2>/dev/null
    while [ "$_tries" -lt 200 ] && [ "$_empty" -lt 2 ]; do
        _p=$(pids_of "$1")
        if [ -z "$_p" ]; then
            # twice empty, 0.2 s apart: nothing was on its way in
            _empty=$((_empty + 1))
            [ "$_empty" -lt 2 ] && sleep 0.2
            continue
        fi
        _empty=0
        for _q in $_p; do
            kill -9 "$_q" 2>/dev/null && _k=$((_k + 1))
        done
        sleep 0.05
        _tries=$((_tries + 1))
    done
    rm -f "$1/down"
    echo "$_k"
    [ "$_empty" = 2 ]
}

enter_args() {
    echo "--net=$1/net --uts=$1/uts --mount=$1/mnt"
}

do_up() {
    _n="" _net=10.213.0 _prefix=pth _br=ptbr0
    while [ $# -gt 0 ]; do
        case $1 in
        --net) _net=${2:-}; shift 2 || die 2 "--net needs A.B.C" ;;
        --net=*) _net=${1#--net=}; shift ;;
        --prefix) _prefix=${2:-}; shift 2 || die 2 "--prefix needs a name" ;;
        --prefix=*) _prefix=${1#--prefix=}; shift ;;
        --bridge) _br=${2:-}; shift 2 || die 2 "--bridge needs a name" ;;
        --bridge=*) _br=${1#--bridge=}; shift ;;
        [1-9]) _n=$1; shift ;;
        *) die 2 "up: bad argument '$1' (usage: up N [--net A.B.C] [--prefix P] [--bridge BR], N = 1..9)" ;;
        esac
    done
    [ -n "$_n" ] || die 2 "usage: sh $SELF up N [--net A.B.C] [--prefix P] [--bridge BR] (N = 1..9)"
    echo "$_net" | grep -Eq '^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$' || die 2 "--net: '$_net' is not A.B.C (the /24 to use)"
    echo "$_prefix" | grep -Eq '^[a-z][a-z0-9]{0,7}$' || die 2 "--prefix: '$_prefix' is not 1-8 of [a-z0-9], a letter first"
    echo "$_br" | grep -Eq '^[a-zA-Z][a-zA-Z0-9_-]{0,14}$' || die 2 "--bridge: '$_br' is not an interface name"
    _hosts=""
    _i=1
    while [ "$_i" -le "$_n" ]; do
        _hosts="$_hosts${_hosts:+ }$_prefix$_i"
        _i=$((_i + 1))
    done
    if [ -f "$STATE/config" ]; then
        . "$STATE/config"
        if [ "$HOSTS" = "$_hosts" ] && [ "$NET" = "$_net" ] && [ "$BRIDGE" = "$_br" ] && healthy; then
            echo "$ME: already up ($HOSTS on $BRIDGE, $NET.0/24); the hostfile:" >&2
            hostfile
            exit 0
        fi
        die 3 "already up with other settings or broken ($HOSTS on $BRIDGE, $NET.0/24, state $STATE); run: sh $SELF down"
    fi
    _why=$(check_env) || die 77 "${_why#"$ME: "}"
    # names and the subnet must be free
    ip link show "$_br" >/dev/null 2>&1 && die 3 "an interface $_br exists already (not ours: no $STATE); choose --bridge"
    for _h in $_hosts; do
        ip link show "${_h}v" >/dev/null 2>&1 && die 3 "an interface ${_h}v exists already; choose --prefix"
    done
    ip -o -4 addr show | grep -q " inet $_net\." && die 3 "the subnet $_net.0/24 is in use on this machine; choose --net"
    [ -e "$STATE" ] && die 3 "$STATE exists without a config (a half-made set?); run: sh $SELF down"

    # from here a failure undoes everything
    trap 'do_down >/dev/null 2>&1' EXIT
    mkdir -p "$STATE" || die 1 "cannot create $STATE"
    mount --bind "$STATE" "$STATE" && mount --make-private "$STATE" || die 1 "cannot bind $STATE privately"
    printf 'BRIDGE=%s\nNET=%s\nPREFIX=%s\nHOSTS="%s"\n' "$_br" "$_net" "$_prefix" "$_hosts" >"$STATE/config"
    . "$STATE/config"
    # the hosts' /etc/hosts: the machine's, plus every host
    {
        cat /etc/hosts 2>/dev/null
        echo "# ptrain nshosts"
        echo "$NET.1 ${BRIDGE}-gw"
        _i=0
        for _h in $HOSTS; do
            _i=$((_i + 1))
            echo "$NET.$((10 + _i)) $_h"
        done
    } >"$STATE/etc-hosts"
    ip link add "$BRIDGE" type bridge && ip addr add "$NET.1/24" dev "$BRIDGE" &&
        ip link set "$BRIDGE" up || die 1 "cannot make the bridge $BRIDGE"
    _i=0
    for _h in $HOSTS; do
        _i=$((_i + 1))
        _d=$STATE/$_h
        mkdir -p "$_d" && : >"$_d/net" && : >"$_d/uts" && : >"$_d/mnt" || die 1 "cannot write $_d"
        # inside: the hostname, /dev/shm, /etc/hosts, lo; the state directory unmounted (the
        # host's processes do not see the other hosts' namespace files, nor hold them)
        unshare --net="$_d/net" --uts="$_d/uts" --mount="$_d/mnt" --propagation private sh -c '
            hostname "$1" &&
            mount -t tmpfs -o mode=1777,nosuid,nodev shm /dev/shm &&
            mount --bind "$2/etc-hosts" /etc/hosts &&
            umount -l "$2" && ip link set lo up' sh "$_h" "$STATE" || die 1 "cannot make the host $_h"
        # eth0 inside, its peer ${_h}v here (in the namespace of this shell), on the bridge
        nsenter --net="$_d/net" ip link add eth0 type veth peer name "${_h}v" netns $$ &&
            ip link set "${_h}v" master "$BRIDGE" && ip link set "${_h}v" up &&
            nsenter --net="$_d/net" ip addr add "$NET.$((10 + _i))/24" dev eth0 &&
            nsenter --net="$_d/net" ip link set eth0 up || die 1 "cannot wire the host $_h"
    done
    # the agent as one word for --mca plm_rsh_agent
    {
        echo '#!/bin/sh'
        echo "# the Open MPI rsh agent of the hosts in $STATE (made by tests/nshosts.sh up)"
        echo "NSHOSTS_STATE='$STATE' exec /bin/sh '$SELF' agent \"\$@\""
    } >"$STATE/agent" && chmod 755 "$STATE/agent" || die 1 "cannot write $STATE/agent"
    trap - EXIT
    echo "$ME: up: $HOSTS on $BRIDGE ($NET.1/24); the hostfile:" >&2
    hostfile
}

# healthy: every namespace file of the config is mounted and the bridge is there
healthy() {
    ip link show "$BRIDGE" >/dev/null 2>&1 || return 1
    for _h in $HOSTS; do
        for _k in net uts mnt; do
            [ "$(stat -f -c %T "$STATE/$_h/$_k" 2>/dev/null)" = nsfs ] || return 1
        done
    done
    return 0
}

do_down() {
    if [ ! -e "$STATE" ]; then
        echo "$ME: nothing is up ($STATE absent)"
        return 0
    fi
    BRIDGE="" HOSTS=""
    [ -f "$STATE/config" ] && . "$STATE/config"
    # every host directory, configured or half-made: first every process of every host, then,
    # once the kernel has sent their sockets' FINs (the links still up), the links and mounts;
    # deleting a veth at once would drop them, and mpirun would wait for a peer that is gone
    _any=0
    for _d in "$STATE"/*/; do
        [ -d "$_d" ] || continue
        _d=${_d%/}
        _k=$(kill_in "$_d")
        [ "$_k" -gt 0 ] && echo "$ME: ${_d##*/}: killed $_k processes" && _any=1
    done
    [ $_any = 1 ] && sleep 0.5
    for _d in "$STATE"/*/; do
        [ -d "$_d" ] || continue
        _d=${_d%/}
        _h=${_d##*/}
        ip link del "${_h}v" 2>/dev/null
        for _f in net uts mnt; do
            umount "$_d/$_f" 2>/dev/null
        done
        rm -rf "$_d"
    done
    if [ -n "$BRIDGE" ] && ip -d link show "$BRIDGE" 2>/dev/null | grep -q ' bridge '; then
        ip link del "$BRIDGE"
    fi
    rm -f "$STATE/config" "$STATE/agent" "$STATE/etc-hosts"
    while findmnt -rn --mountpoint "$STATE" >/dev/null 2>&1; do
        umount "$STATE" || break
    done
    rmdir "$STATE" 2>/dev/null
    # what is left, if anything
    _left=""
    [ -e "$STATE" ] && _left="$_left $STATE"
    grep -qF " $STATE" /proc/self/mountinfo && _left="$_left mounts-under-$STATE"
    [ -n "$BRIDGE" ] && ip link show "$BRIDGE" >/dev/null 2>&1 && _left="$_left link:$BRIDGE"
    for _h in $HOSTS; do
        ip link show "${_h}v" >/dev/null 2>&1 && _left="$_left link:${_h}v"
    done
    [ -z "$_left" ] || die 1 "down: left behind:$_left"
    echo "$ME: down: ${HOSTS:-no hosts} and ${BRIDGE:-no bridge} removed, $STATE deleted"
}

do_agent() {
    # options an rsh agent may be given before the host (none from Open MPI for this agent)
    while [ $# -gt 0 ]; do
        case $1 in -*) shift ;; *) break ;; esac
    done
    [ $# -ge 1 ] || die 255 "agent: usage: agent HOST COMMAND..."
    _host=$1
    shift
    [ -f "$STATE/config" ] || die 255 "agent: $_host: no hosts are up ($STATE/config absent)"
    . "$STATE/config"
    resolve "$_host" || die 255 "agent: $_host: no such host (hosts: $HOSTS)"
    [ -e "$D/cut" ] && die 255 "agent: connect to host $_host ($H): No route to host (the host is cut)"
    [ -e "$D/down" ] && die 255 "agent: connect to host $_host ($H): Connection refused (the host is being killed)"
    [ $# -ge 1 ] || die 255 "agent: $_host: no command (no interactive login)"
    _ns=$(command -v nsenter)
    # Once inside, the marks are looked at again (the state directory's plain files are seen from
    # inside, its namespace mounts are not): a kill or a cut that came while this agent was on its
    # way in wins, since kill_in scans for processes only after it has made its mark.
    # shellcheck disable=SC2016,SC2046
    exec env -i PATH="${PATH:-/usr/bin:/bin}" HOME="${HOME:-/root}" USER="${USER:-root}" \
        LOGNAME="${LOGNAME:-root}" LANG="${LANG:-C}" ${LD_LIBRARY_PATH:+LD_LIBRARY_PATH="$LD_LIBRARY_PATH"} \
        "$_ns" $(enter_args "$D") -- /bin/sh -c '
        if [ -e "$1/cut" ] || [ -e "$1/down" ]; then
            echo "nshosts: agent: connect to host $2: No route to host (cut or killed)" >&2
            exit 255
        fi
        exec /bin/sh -c "$3"' sh "$D" "$_host" "$*"
}

do_selftest() {
    export NSHOSTS_STATE=/run/ptrain-nshosts-selftest
    STATE=$NSHOSTS_STATE
    _net=10.213.9
    _up="--net $_net --prefix pts --bridge ptbr9"
    NP=0 NF=0
    pass() { NP=$((NP + 1)); echo "PASS $1"; }
    fail() { NF=$((NF + 1)); echo "FAIL $1: $2"; }
    ms() { echo $(($(date +%s%N) / 1000000)); }
    nsh() { sh "$SELF" "$@"; }
    _why=$(check_env) || {
        echo "$_why"
        echo "SKIP nshosts selftest (namespaces cannot be made here)"
        exit 77
    }
    [ -e "$STATE" ] && die 3 "$STATE exists: a selftest is running, or one was left behind (NSHOSTS_STATE=$STATE sh $SELF down)"
    T=$(mktemp -d /tmp/nshosts-selftest.XXXXXX) || die 1 "mktemp failed"
    MPID=""
    trap 'st=$?; [ -n "$MPID" ] && kill "$MPID" 2>/dev/null; nsh down >/dev/null 2>&1; rm -rf "$T"; exit $st' EXIT
    trap 'exit 130' INT TERM
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

    # up 3: hostnames, /dev/shm, /etc/hosts, the pids of an empty host
    _t0=$(ms)
    # shellcheck disable=SC2086
    nsh up 3 $_up >"$T/hf3" 2>"$T/up3.err" && pass "up 3" || fail "up 3" "$(cat "$T/up3.err")"
    _tup=$(($(ms) - _t0))
    echo "time: up 3 took $_tup ms"
    [ "$(wc -l <"$T/hf3")" = 3 ] && grep -q "^$_net.13 slots=2$" "$T/hf3" && pass "up prints 3 hostfile lines" ||
        fail "up prints the hostfile" "$(cat "$T/hf3")"
    # shellcheck disable=SC2086
    nsh up 3 $_up >/dev/null 2>&1 && pass "up again with the same settings: no-op" || fail "up twice" "status $?"
    # shellcheck disable=SC2086
    nsh up 2 $_up >/dev/null 2>&1
    [ $? = 3 ] && pass "up with other settings refused (3)" || fail "up with other settings" "not refused with 3"
    _ok=1
    for _i in 1 2 3; do
        [ "$(nsh exec pts$_i hostname)" = "pts$_i" ] || _ok=0
    done
    [ "$(hostname)" != pts1 ] || _ok=0
    [ $_ok = 1 ] && pass "each host has its hostname, the machine keeps its own" || fail "hostnames" "$(nsh exec pts1 hostname)"
    nsh exec pts1 sh -c 'echo x >/dev/shm/nshosts-selftest'
    if nsh exec pts1 test -e /dev/shm/nshosts-selftest && ! nsh exec pts2 test -e /dev/shm/nshosts-selftest &&
        ! test -e /dev/shm/nshosts-selftest; then pass "each host has its own /dev/shm"; else fail "/dev/shm" "shared"; fi
    [ "$(nsh exec pts1 sh -c 'getent hosts pts3' | awk '{print $1}')" = "$_net.13" ] &&
        ! grep -q pts3 /etc/hosts && pass "host names resolve inside the hosts only" || fail "/etc/hosts" "pts3 unresolved in pts1"
    [ "$(nsh exec pts2 ip -o -4 addr show dev eth0 | awk '{print $4}')" = "$_net.12/24" ] &&
        pass "pts2 has $_net.12 on eth0" || fail "address" "$(nsh exec pts2 ip -o addr)"
    [ -z "$(nsh pids pts1)" ] && pass "an idle host has no process" || fail "pids of an idle host" "$(nsh pids pts1)"
    _a=$(ms)
    nsh agent $_net.13 'hostname; echo "$OMPI_ALLOW_RUN_AS_ROOT"' >"$T/ag" 2>&1
    [ "$(cat "$T/ag")" = pts3 ] && pass "agent by address runs a shell line on the host, mpirun's environment left out ($(($(ms) - _a)) ms)" ||
        fail "agent" "$(cat "$T/ag")"
    nsh agent 10.213.77.1 true 2>/dev/null
    [ $? = 255 ] && pass "agent: unknown host, 255" || fail "agent unknown host" "not 255"
    nsh down >/dev/null 2>&1 && pass "down after up 3" || fail "down" "$(nsh down 2>&1)"
    [ ! -e "$STATE" ] && pass "down deletes the state" || fail "down" "$STATE left"
    nsh down >/dev/null 2>&1 && pass "down twice" || fail "down twice" "status $?"

    if ! command -v mpirun >/dev/null 2>&1 || ! command -v mpicc >/dev/null 2>&1; then
        echo "SKIP the Open MPI trials: mpirun/mpicc not found (openmpi-bin libopenmpi-dev)"
    else
        cat >"$T/allred.c" <<'EOF'
/* an Allreduce across the hosts: rank, hostname, the sum of 1..size and of a 2 MiB vector */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int rank, size, it, i, n = 1 << 18, iters = argc > 1 ? atoi(argv[1]) : 1, bad = 0;
    char host[256];
    double *v = malloc(n * sizeof *v), *s = malloc(n * sizeof *s), one, sum;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    gethostname(host, sizeof host);
    for (it = 0; it < iters; it++) {
        one = rank + 1;
        MPI_Allreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        for (i = 0; i < n; i++) v[i] = rank + i;
        MPI_Allreduce(v, s, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        for (i = 0; i < n; i++) bad += s[i] != size * (double)i + size * (size - 1) / 2.0;
        if (it == 0) { printf("rank %d of %d on %s sum %g bad %d\n", rank, size, host, sum, bad); fflush(stdout); }
        if (iters > 1) usleep(100000);
    }
    MPI_Finalize();
    return bad != 0;
}
EOF
        mpicc -O1 "$T/allred.c" -o "$T/allred" >"$T/cc.log" 2>&1 || fail "build the Allreduce program" "$(cat "$T/cc.log")"
        # shellcheck disable=SC2086
        nsh up 2 $_up >"$T/hf" 2>"$T/up2.err" && pass "up 2" || fail "up 2" "$(cat "$T/up2.err")"
        ARGS=$(nsh mpirun-args)
        echo "mpirun-args: $ARGS"
        MR="timeout 60 mpirun $ARGS --oversubscribe --mca mpi_yield_when_idle 1 --hostfile $T/hf"
        _t0=$(ms)
        # shellcheck disable=SC2086
        $MR -np 4 hostname >"$T/hn" 2>"$T/hn.err"
        _rc=$?
        _tmr=$(($(ms) - _t0))
        echo "time: mpirun -np 4 hostname across 2 hosts took $_tmr ms"
        [ $_rc = 0 ] && [ "$(sort "$T/hn" | uniq -c | awk '{print $1 $2}' | tr '\n' ' ')" = "2pts1 2pts2 " ] &&
            pass "mpirun -np 4 hostname: 2 ranks on pts1, 2 on pts2" || fail "mpirun hostname" "status $_rc: $(cat "$T/hn" "$T/hn.err")"
        # shellcheck disable=SC2086
        $MR -np 4 "$T/allred" >"$T/ar" 2>"$T/ar.err"
        _rc=$?
        [ $_rc = 0 ] && [ "$(grep -c 'sum 10 bad 0' "$T/ar")" = 4 ] &&
            [ "$(awk '/^rank/ {print $6}' "$T/ar" | sort -u | tr '\n' ' ')" = "pts1 pts2 " ] &&
            pass "Allreduce on 4 ranks across pts1 and pts2, the sums right" || fail "Allreduce" "status $_rc: $(cat "$T/ar" "$T/ar.err")"
        # the same with TCP the only way out of a rank (no shared memory even within a host)
        # shellcheck disable=SC2086
        timeout 60 mpirun $(echo "$ARGS" | sed 's/btl tcp,self,vader/btl tcp,self/') --oversubscribe \
            --mca mpi_yield_when_idle 1 --hostfile "$T/hf" -np 4 "$T/allred" >"$T/ar2" 2>"$T/ar2.err"
        _rc=$?
        [ $_rc = 0 ] && [ "$(grep -c 'sum 10 bad 0' "$T/ar2")" = 4 ] &&
            pass "Allreduce over TCP only (btl tcp,self)" || fail "Allreduce over TCP" "status $_rc: $(cat "$T/ar2" "$T/ar2.err")"

        # cut: the agent refuses at once, mpirun fails to start, the hostfile leaves the host out
        nsh cut pts2 >/dev/null
        _a=$(ms)
        nsh agent $_net.12 true 2>"$T/cut.err"
        _rc=$?
        _ta=$(($(ms) - _a))
        [ $_rc = 255 ] && [ $_ta -lt 2000 ] && grep -q 'No route to host' "$T/cut.err" &&
            pass "cut pts2: agent exits 255 in $_ta ms" || fail "cut agent" "status $_rc in $_ta ms: $(cat "$T/cut.err")"
        [ "$(nsh hostfile 2 | wc -l)" = 1 ] && pass "cut pts2: hostfile without it" || fail "hostfile after cut" "$(nsh hostfile 2)"
        ip -o link show pts2v | grep -q 'state DOWN' && pass "cut pts2: its veth is down on the bridge" ||
            fail "cut link" "$(ip -o link show pts2v)"
        _a=$(ms)
        # shellcheck disable=SC2086
        $MR -np 4 hostname >"$T/cutmr" 2>&1
        _rc=$?
        _ta=$(($(ms) - _a))
        [ $_rc != 0 ] && [ $_rc != 124 ] && [ $_ta -lt 15000 ] && pass "mpirun over a cut host fails in $_ta ms (status $_rc)" ||
            fail "mpirun over a cut host" "status $_rc in $_ta ms"
        nsh restore pts2 >/dev/null
        nsh agent $_net.12 hostname >"$T/rest" 2>&1
        [ $? = 0 ] && [ "$(cat "$T/rest")" = pts2 ] && pass "restore pts2: agent works again" || fail "restore" "$(cat "$T/rest")"
        # shellcheck disable=SC2086
        $MR -np 4 hostname >"$T/hn2" 2>"$T/hn2.err" && [ "$(sort -u "$T/hn2" | tr '\n' ' ')" = "pts1 pts2 " ] &&
            pass "restore pts2: mpirun across both hosts again" || fail "mpirun after restore" "$(cat "$T/hn2" "$T/hn2.err")"

        # kill: a host dies under a running job
        # shellcheck disable=SC2086
        : >"$T/long"
        $MR -np 4 "$T/allred" 600 >"$T/long" 2>&1 &
        MPID=$!
        _i=0
        while [ "$(grep -c '^rank' "$T/long")" -lt 4 ] && [ $_i -lt 300 ] && kill -0 $MPID 2>/dev/null; do
            sleep 0.1
            _i=$((_i + 1))
        done
        _p2=$(nsh pids pts2 | wc -l)
        [ "$(grep -c '^rank' "$T/long")" = 4 ] && [ "$_p2" -ge 3 ] &&
            pass "a long job runs: $_p2 processes on pts2 (its orted, 2 ranks)" || fail "long job" "$_p2 on pts2: $(cat "$T/long")"
        nsh exec pts1 ss -tn >"$T/ss"
        grep -q "$_net.11:[0-9]* *$_net.12:" "$T/ss" && pass "TCP connections between pts1 and pts2 (ss in pts1)" ||
            fail "TCP between the hosts" "$(cat "$T/ss")"
        _a=$(ms)
        _k=$(nsh kill pts2)
        echo "kill pts2: $_k"
        [ -z "$(nsh pids pts2)" ] && pass "kill pts2: no process left in it" || fail "kill pts2" "$(nsh pids pts2)"
        while kill -0 $MPID 2>/dev/null && [ $(($(ms) - _a)) -lt 30000 ]; do sleep 0.1; done
        wait $MPID
        _rc=$?
        MPID=""
        _ta=$(($(ms) - _a))
        echo "time: mpirun exited $_ta ms after kill pts2, status $_rc"
        [ $_rc != 0 ] && [ $_rc != 124 ] && [ $_ta -lt 10000 ] && pass "mpirun exits non-zero ($_rc) $_ta ms after the host died" ||
            fail "mpirun after kill" "status $_rc after $_ta ms"
        _i=0
        while [ -n "$(nsh pids pts1)$(nsh pids pts2)" ] && [ $_i -lt 50 ]; do
            sleep 0.1
            _i=$((_i + 1))
        done
        [ -z "$(nsh pids pts1)$(nsh pids pts2)" ] && ! pgrep -f "$T/allred" >/dev/null &&
            pass "no orted or rank of the job left on any host" || fail "leftovers" "pts1: $(nsh pids pts1) pts2: $(nsh pids pts2)"
        # shellcheck disable=SC2086
        $MR -np 4 hostname >"$T/hn3" 2>"$T/hn3.err" && [ "$(sort -u "$T/hn3" | tr '\n' ' ')" = "pts1 pts2 " ] &&
            pass "the killed host takes a new job (a rebooted machine)" || fail "mpirun after kill" "$(cat "$T/hn3" "$T/hn3.err")"
        # kill while the job is starting (agents on their way in, daemons not yet called back):
        # mpirun ends at once, or the kill came before the job reached pts2 and it ran
        for _d in 0.1 0.2 0.3; do
            _a=$(ms)
            # shellcheck disable=SC2086
            $MR -np 4 "$T/allred" 20 >"$T/st" 2>&1 &
            MPID=$!
            sleep $_d
            _k=$(nsh kill pts2 | awk '{print $3}')
            wait $MPID
            _rc=$?
            MPID=""
            _ta=$(($(ms) - _a))
            if { [ $_rc != 0 ] && [ $_rc != 124 ] && [ $_ta -lt 10000 ]; } || { [ "$_k" = 0 ] && [ $_rc = 0 ]; }; then
                pass "kill pts2 ${_d} s into a launch: $_k killed, mpirun status $_rc after $_ta ms"
            else
                fail "kill pts2 ${_d} s into a launch" "$_k killed, mpirun status $_rc after $_ta ms"
            fi
        done
        # down with a job running: its processes go too
        # shellcheck disable=SC2086
        # (started, not starting: a daemon killed before it has called mpirun back leaves
        # mpirun waiting for it, an Open MPI quirk the supervisor must time out)
        : >"$T/long2"
        $MR -np 4 "$T/allred" 600 >"$T/long2" 2>&1 &
        MPID=$!
        _i=0
        while [ "$(grep -c '^rank' "$T/long2")" -lt 4 ] && [ $_i -lt 300 ] && kill -0 $MPID 2>/dev/null; do
            sleep 0.1
            _i=$((_i + 1))
        done
    fi
    nsh down >"$T/down" 2>&1 && pass "down" || fail "down" "$(cat "$T/down")"
    if [ -n "$MPID" ]; then
        _i=0
        while kill -0 $MPID 2>/dev/null && [ $_i -lt 100 ]; do
            sleep 0.1
            _i=$((_i + 1))
        done
        kill -0 $MPID 2>/dev/null && fail "down with a job running" "mpirun still runs" ||
            pass "down with a job running: mpirun ends"
        wait $MPID 2>/dev/null
        MPID=""
        pgrep -f "$T/allred" >/dev/null && fail "down with a job running" "ranks left" ||
            pass "down with a job running: no rank left"
    fi
    _left=""
    [ -e "$STATE" ] && _left="$_left $STATE"
    grep -qF "$STATE" /proc/self/mountinfo && _left="$_left mounts"
    ip -o link show | grep -Eq ': (ptbr9|pts[0-9]v)[:@]' && _left="$_left links"
    [ -z "$_left" ] && pass "down leaves nothing behind (ip link, mounts, $STATE)" || fail "down leftovers" "$_left"
    echo "$NP passed, $NF failed"
    [ "$NF" = 0 ]
}

CMD=${1:-}
[ $# -gt 0 ] && shift
case $CMD in
up) do_up "$@" ;;
down) do_down ;;
agent) do_agent "$@" ;;
exec)
    need_host "$@"
    shift
    [ $# -ge 1 ] || die 2 "usage: sh $SELF exec HOST COMMAND [ARG...]"
    # shellcheck disable=SC2046
    exec nsenter $(enter_args "$D") --wd="$(pwd -P)" -- "$@"
    ;;
pids)
    need_host "$@"
    pids_of "$D"
    ;;
kill)
    need_host "$@"
    _k=$(kill_in "$D") || die 1 "$H: processes are left after SIGKILL: $(pids_of "$D" | tr '\n' ' ')"
    echo "$H: killed $_k processes"
    ;;
cut)
    need_host "$@"
    : >"$D/cut" && ip link set "${H}v" down || die 1 "cannot cut $H"
    echo "$H ($A) cut: unreachable"
    ;;
restore)
    need_host "$@"
    rm -f "$D/cut" && ip link set "${H}v" up || die 1 "cannot restore $H"
    echo "$H ($A) restored"
    ;;
hostfile)
    load
    case ${1:-2} in *[!0-9]* | 0) die 2 "hostfile: SLOTS must be a positive number" ;; esac
    hostfile "${1:-2}"
    ;;
mpirun-args)
    load
    echo "--mca plm_rsh_agent $STATE/agent --mca plm_rsh_no_tree_spawn 1 --mca orte_leave_session_attached 1 --mca pml ob1 --mca btl tcp,self,vader --mca btl_tcp_if_include $NET.0/24 --mca oob_tcp_if_include $NET.0/24"
    ;;
check)
    _why=$(check_env) || {
        echo "$_why"
        exit 77
    }
    echo "$ME: namespaces, a bridge and veths can be made here"
    ;;
selftest) do_selftest ;;
"" | -h | --help | help) sed -n '2,/^set -u/p' "$SELF" | sed '$d; s/^# \{0,1\}//' ;;
*) die 2 "unknown subcommand '$CMD' (up down agent exec pids kill cut restore hostfile mpirun-args check selftest help)" ;;
esac
