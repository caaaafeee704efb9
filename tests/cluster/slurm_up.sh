#!/usr/bin/env bash
# Bring up a real single-node SLURM cluster with accounting (slurmdbd on a private MariaDB)
# on this machine, for the cluster tests. See tests/cluster/README.md and
# `docs/toolchain.md` (the SLURM section).
#
# Idempotent: installs packages only when missing, reuses a healthy cluster, restarts only the
# daemons that are not running. Every daemon this script starts has its pid recorded in
# $STATE/pids/<name>.pid; tests/cluster/slurm_down.sh stops exactly those (never by name).
#
# Environment (all optional):
#   PPO_LAB_SLURM_STATE    state folder (default /var/tmp/ppo_lab_slurm)
#   PPO_LAB_SLURM_DB_PORT  private MariaDB port (default 3307)
#   PPO_LAB_SLURM_WAIT_S   bound on each wait, seconds (default 60)
#   PPO_LAB_SLURM_NO_APT=1 never call apt-get (fail if something is missing)
set -euo pipefail

STATE=${PPO_LAB_SLURM_STATE:-/var/tmp/ppo_lab_slurm}
DB_PORT=${PPO_LAB_SLURM_DB_PORT:-3307}
WAIT_S=${PPO_LAB_SLURM_WAIT_S:-60}
CLUSTER=ppolab
PARTITION=debug
DBD_PORT=6819
DB_USER=slurm
DB_PASS=ppo_lab_slurm_db   # private DB bound to 127.0.0.1; test-only credential
NODE=$(hostname -s)
PIDS=$STATE/pids
LOG=$STATE/log
RUN=$STATE/run
MARKER="# written by ppo_lab tests/cluster/slurm_up.sh"
T0=$EPOCHREALTIME

say() { awk -v t0="$T0" -v t1="$EPOCHREALTIME" -v m="$*" 'BEGIN { printf "[slurm_up %6.1fs] %s\n", t1 - t0, m }'; }
die() {
    echo "[slurm_up] ERROR: $1" >&2
    shift
    for f in "$@"; do
        [ -f "$f" ] && { echo "---- last lines of $f ----" >&2; tail -n 25 "$f" >&2; }
    done
    if compgen -G "$PIDS/*.pid" >/dev/null; then
        echo "[slurm_up] daemons started so far stay up; stop them with tests/cluster/slurm_down.sh" >&2
    fi
    exit 1
}

. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/pids.sh"   # alive, our_pid

# record NAME PIDFILE LOG [LAUNCHER_PID]: wait for the daemon's own pid file, check it runs,
# copy it to $PIDS. Fails at once if LAUNCHER_PID (a foreground daemon's pid) has exited.
record() {
    local name=$1 pidfile=$2 logf=$3 launcher=${4:-} i pid=""
    for ((i = 0; i < WAIT_S * 10; i++)); do
        if [ -n "$launcher" ] && ! alive "$launcher"; then
            die "$name exited during start-up" "$logf"
        fi
        if [ -s "$pidfile" ]; then
            pid=$(tr -d ' \n' <"$pidfile")
            if [[ "$pid" =~ ^[0-9]+$ ]] && alive "$pid" &&
                [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = "$name" ]; then
                echo "$pid" >"$PIDS/$name.pid"
                say "started $name (pid $pid)"
                return 0
            fi
        fi
        sleep 0.1
    done
    die "$name did not start within ${WAIT_S}s (no live pid in $pidfile)" "$logf"
}

# wait_for DESCRIPTION LOGFILE... -- COMMAND...: poll COMMAND every 0.2 s up to WAIT_S.
wait_for() {
    local what=$1 logs=() i
    shift
    while [ "$1" != "--" ]; do logs+=("$1"); shift; done
    shift
    for ((i = 0; i < WAIT_S * 5; i++)); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.2
    done
    die "timed out after ${WAIT_S}s waiting for: $what" "${logs[@]}"
}

node_state() { sinfo -h -o %T 2>/dev/null | head -n1 | tr -d ' '; }
node_idle() { [ "$(node_state)" = idle ]; }
sacct_ok() { sacct -n -X -S now-1hours -o JobID >/dev/null 2>&1; }
cluster_listed() { sacctmgr -n -P list cluster format=Cluster 2>/dev/null | grep -qx "$CLUSTER"; }
munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
# sinfo retries for ~9 s when no slurmctld listens: test the ports first, which fails at once.
port_open() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }
# every daemon we recorded must still run: slurmctld keeps calling a dead slurmd's node idle
# for SlurmdTimeout seconds.
recorded_alive() {
    local f
    for f in "$PIDS"/*.pid; do
        [ -e "$f" ] || continue
        our_pid "$(basename "$f" .pid)" >/dev/null || return 1
    done
}
healthy() {
    recorded_alive && port_open 6817 && port_open 6818 && port_open "$DBD_PORT" &&
        node_idle && sacct_ok && cluster_listed
}

[ "$(id -u)" = 0 ] || die "run as root (installs packages, writes /etc/slurm)"

# ---------------------------------------------------------------- packages
need_install=0
for b in slurmctld slurmd slurmdbd sbatch sacct sacctmgr munged munge mariadbd mariadb-install-db mariadb-admin; do
    command -v "$b" >/dev/null 2>&1 || need_install=1
done
if [ "$need_install" = 1 ]; then
    [ "${PPO_LAB_SLURM_NO_APT:-0}" = 1 ] && die "SLURM/munge/MariaDB not installed and PPO_LAB_SLURM_NO_APT=1"
    say "installing slurmctld slurmd slurm-client munge slurmdbd mariadb-server (apt)"
    # Keep package scripts from starting services we would not track: a temporary policy-rc.d
    # (only if the machine has none of its own).
    added_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        added_policy=1
    fi
    apt_install() {
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q \
            slurmctld slurmd slurm-client munge slurmdbd mariadb-server >"$1" 2>&1
    }
    mkdir -p "$LOG"
    if ! apt_install "$LOG/apt.log"; then
        say "apt-get install failed; running apt-get update and retrying"
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -q >>"$LOG/apt.log" 2>&1 || true
        apt_install "$LOG/apt.log" || { [ "$added_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d; die "apt-get install failed" "$LOG/apt.log"; }
    fi
    [ "$added_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
    say "installed"
else
    say "packages already installed"
fi

mkdir -p "$PIDS" "$LOG" "$RUN" "$STATE/spool/ctld" "$STATE/spool/d"
chmod 755 "$STATE"

# ---------------------------------------------------------------- reuse a healthy cluster
if healthy; then
    mine=()
    for d in munged mariadbd slurmdbd slurmctld slurmd; do
        p=$(our_pid "$d") && mine+=("$d=$p")
    done
    if [ "${#mine[@]}" -gt 0 ]; then
        say "reusing the healthy cluster '$CLUSTER' already up (started earlier by slurm_up.sh: ${mine[*]})"
    else
        say "reusing a healthy cluster that this script did not start; slurm_down.sh will not stop it"
    fi
    exit 0
fi

# ---------------------------------------------------------------- config files
write_if_changed() {   # write_if_changed PATH MODE  (content on stdin)
    local tmp
    tmp=$(mktemp)
    cat >"$tmp"
    if [ -f "$1" ] && ! grep -qF "$MARKER" "$1" && [ ! -e "$1.ppo_lab-orig" ]; then
        cp -p "$1" "$1.ppo_lab-orig"   # keep a foreign config once, never overwrite the backup
    fi
    if ! cmp -s "$tmp" "$1" 2>/dev/null; then
        install -m "$2" "$tmp" "$1"
    fi
    rm -f "$tmp"
}

# Node hardware from slurmd itself, so slurmd never finds the node "invalid".
hw=$(slurmd -C | head -n1 | sed -E 's/^NodeName=[^ ]+ //')
[ -n "$hw" ] || die "slurmd -C printed nothing"
mkdir -p /etc/slurm
write_if_changed /etc/slurm/slurm.conf 644 <<EOF
$MARKER
# single-node test cluster; state, spool, pids and logs under $STATE
ClusterName=$CLUSTER
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$STATE/spool/ctld
SlurmdSpoolDir=$STATE/spool/d
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# no cgroups on this machine
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# without this every batch job waits ~3 s before it is scheduled
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=300
# accounting: submitit polls job state only with sacct
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
JobCompType=jobcomp/none
NodeName=$NODE NodeAddr=127.0.0.1 $hw State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF

write_if_changed /etc/slurm/slurmdbd.conf 600 <<EOF
$MARKER
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
AuthType=auth/munge
PidFile=$RUN/slurmdbd.pid
LogFile=$LOG/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=$DB_USER
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
EOF
chown root:root /etc/slurm/slurmdbd.conf

# ---------------------------------------------------------------- munge
if munge_ok; then
    if p=$(our_pid munged); then say "munged running (ours, pid $p)"; else say "munge already works (not started by this script)"; fi
else
    [ -s /etc/munge/munge.key ] || {
        say "creating /etc/munge/munge.key"
        dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
        chown munge:munge /etc/munge/munge.key
        chmod 400 /etc/munge/munge.key
    }
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    chmod 755 /run/munge
    rm -f /run/munge/munged.pid
    runuser -u munge -- munged </dev/null >>"$LOG/munged.out" 2>&1 || die "munged failed to start" "$LOG/munged.out" /var/log/munge/munged.log
    record munged /run/munge/munged.pid /var/log/munge/munged.log
    wait_for "munge -n | unmunge" /var/log/munge/munged.log -- munge_ok
fi

# ---------------------------------------------------------------- private MariaDB
DATADIR=$STATE/mysql
SOCK=$RUN/mysqld.sock
db_ping() { mariadb-admin --no-defaults --socket="$SOCK" -uroot ping; }
if p=$(our_pid mariadbd) && db_ping >/dev/null 2>&1; then
    say "mariadbd running (ours, pid $p)"
else
    if [ ! -d "$DATADIR/mysql" ]; then
        say "initialising MariaDB datadir $DATADIR"
        mkdir -p "$DATADIR"
        chown mysql:mysql "$DATADIR"
        mariadb-install-db --no-defaults --user=mysql --datadir="$DATADIR" --skip-test-db \
            --auth-root-authentication-method=socket >"$LOG/mariadb-install.log" 2>&1 ||
            die "mariadb-install-db failed" "$LOG/mariadb-install.log"
    fi
    chown mysql:mysql "$RUN" 2>/dev/null || true
    chmod 755 "$RUN"
    rm -f "$RUN/mariadbd.pid"
    # mariadbd stays in the foreground: detach it into its own session, stdio to files, so a
    # caller that captures our output (pytest, CI) is not held open by it.
    setsid mariadbd --no-defaults --user=mysql --datadir="$DATADIR" --socket="$SOCK" \
        --port="$DB_PORT" --bind-address=127.0.0.1 --skip-name-resolve --skip-log-bin \
        --innodb-buffer-pool-size=32M --innodb-log-file-size=16M --max-connections=50 \
        --pid-file="$RUN/mariadbd.pid" </dev/null >>"$LOG/mariadb.log" 2>&1 &
    # (its error log goes to stderr, i.e. this file: as user mysql it cannot open files in $LOG)
    record mariadbd "$RUN/mariadbd.pid" "$LOG/mariadb.log" $!
    wait_for "MariaDB to answer on $SOCK" "$LOG/mariadb.log" -- db_ping
fi
mariadb --no-defaults --socket="$SOCK" -uroot >>"$LOG/mariadb-setup.log" 2>&1 <<EOF || die "could not create the slurm DB user" "$LOG/mariadb-setup.log"
CREATE USER IF NOT EXISTS '$DB_USER'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASS';
GRANT ALL ON slurm_acct_db.* TO '$DB_USER'@'127.0.0.1';
GRANT ALL ON slurm_acct_db.* TO '$DB_USER'@'localhost';
FLUSH PRIVILEGES;
EOF

# ---------------------------------------------------------------- slurmdbd
if p=$(our_pid slurmdbd); then
    say "slurmdbd running (ours, pid $p)"
else
    rm -f "$RUN/slurmdbd.pid"
    slurmdbd </dev/null >>"$LOG/slurmdbd.out" 2>&1 || die "slurmdbd failed to start" "$LOG/slurmdbd.out" "$LOG/slurmdbd.log"
    record slurmdbd "$RUN/slurmdbd.pid" "$LOG/slurmdbd.log"
fi
wait_for "slurmdbd to answer (sacctmgr list cluster)" "$LOG/slurmdbd.log" -- sacctmgr -n list cluster

# ---------------------------------------------------------------- slurmctld, slurmd
if p=$(our_pid slurmctld); then
    say "slurmctld running (ours, pid $p)"
    scontrol reconfigure >/dev/null 2>&1 || true
else
    rm -f "$RUN/slurmctld.pid"
    slurmctld </dev/null >>"$LOG/slurmctld.out" 2>&1 || die "slurmctld failed to start" "$LOG/slurmctld.out" "$LOG/slurmctld.log"
    record slurmctld "$RUN/slurmctld.pid" "$LOG/slurmctld.log"
fi
if p=$(our_pid slurmd); then
    say "slurmd running (ours, pid $p)"
else
    rm -f "$RUN/slurmd.pid"
    slurmd -N "$NODE" </dev/null >>"$LOG/slurmd.out" 2>&1 || die "slurmd failed to start" "$LOG/slurmd.out" "$LOG/slurmd.log"
    record slurmd "$RUN/slurmd.pid" "$LOG/slurmd.log"
fi

# ---------------------------------------------------------------- ready?
for ((i = 0; i < WAIT_S * 5; i++)); do
    st=$(node_state)
    case "$st" in
    idle) break ;;
    down* | drain* | drained* | fail*)
        scontrol update NodeName="$NODE" State=RESUME >/dev/null 2>&1 || true ;;
    esac
    sleep 0.2
done
node_idle || die "node $NODE is '$(node_state)', not idle, after ${WAIT_S}s" "$LOG/slurmctld.log" "$LOG/slurmd.log"
wait_for "cluster '$CLUSTER' registered in slurmdbd (sacctmgr -n list cluster)" "$LOG/slurmctld.log" "$LOG/slurmdbd.log" -- cluster_listed
wait_for "sacct to answer" "$LOG/slurmdbd.log" -- sacct_ok
say "cluster '$CLUSTER' is up: node $NODE idle, partition $PARTITION, accounting on (state: $STATE)"
