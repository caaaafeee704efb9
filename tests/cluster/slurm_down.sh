#!/usr/bin/env bash
# Stop exactly the daemons tests/cluster/slurm_up.sh started: the pids it recorded in
# $STATE/pids/*.pid, each checked to still be the same program, never anything found by name.
# Cancels queued/running jobs first so no job step (slurmstepd) outlives slurmd.
# Safe to run twice; a no-op when nothing of ours runs.
#
#   slurm_down.sh           stop the daemons, keep state (DB, job ids, logs) for a fast restart
#   slurm_down.sh --purge   also delete the state folder (next slurm_up.sh starts from scratch)
#
# Environment: PPO_LAB_SLURM_STATE (default /var/tmp/ppo_lab_slurm),
#              PPO_LAB_SLURM_STOP_S (seconds to wait for each daemon before SIGKILL, default 30)
set -uo pipefail

STATE=${PPO_LAB_SLURM_STATE:-/var/tmp/ppo_lab_slurm}
STOP_S=${PPO_LAB_SLURM_STOP_S:-30}
PIDS=$STATE/pids
PURGE=0
[ "${1:-}" = "--purge" ] && PURGE=1

say() { echo "[slurm_down] $*"; }

. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/pids.sh"   # alive, our_pid

stop() {   # stop NAME
    local name=$1 pid i
    if ! pid=$(our_pid "$name"); then
        [ -f "$PIDS/$name.pid" ] && say "$name (pid $(cat "$PIDS/$name.pid")) already gone"
        rm -f "$PIDS/$name.pid"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < STOP_S * 10; i++)); do
        alive "$pid" || break
        sleep 0.1
    done
    if alive "$pid"; then
        say "$name (pid $pid) ignored SIGTERM for ${STOP_S}s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null
        for ((i = 0; i < 50; i++)); do alive "$pid" || break; sleep 0.1; done
    fi
    if alive "$pid"; then
        say "ERROR: $name (pid $pid) is still running"
        return 1
    fi
    say "stopped $name (pid $pid)"
    rm -f "$PIDS/$name.pid"
}

rc=0
if [ -d "$PIDS" ]; then
    # Jobs first, while slurmctld and slurmd still run, so their steps are torn down.
    if our_pid slurmctld >/dev/null && command -v squeue >/dev/null; then
        jobs=$(squeue -h -o %i 2>/dev/null | tr '\n' ' ')
        if [ -n "${jobs// /}" ]; then
            say "cancelling jobs: $jobs"
            # shellcheck disable=SC2086
            scancel $jobs 2>/dev/null
            for ((i = 0; i < 300; i++)); do
                [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
                sleep 0.1
            done
            [ -n "$(squeue -h -o %i 2>/dev/null)" ] && say "warning: jobs still listed after 30s: $(squeue -h -o '%i %T' | tr '\n' ' ')"
        fi
    fi
    for d in slurmd slurmctld slurmdbd mariadbd munged; do
        stop "$d" || rc=1
    done
    # Any other file in pids/ is not ours to interpret; report it.
    for f in "$PIDS"/*.pid; do
        [ -e "$f" ] && say "warning: unexpected pid file left: $f"
    done
else
    say "nothing to stop (no $PIDS)"
fi

if [ "$PURGE" = 1 ]; then
    if [ "$rc" = 0 ]; then
        rm -rf "$STATE"
        say "purged $STATE"
    else
        say "not purging $STATE: a daemon is still running"
    fi
fi
exit $rc
