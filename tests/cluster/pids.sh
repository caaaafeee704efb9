# Sourced by slurm_up.sh and slurm_down.sh: the pid bookkeeping both rely on. Needs $PIDS.

# alive PID: a live process that is not a zombie ("kill -0" succeeds on zombies).
alive() {
    local st
    st=$(ps -o stat= -p "$1" 2>/dev/null | tr -d ' ') || return 1
    [ -n "$st" ] && [ "${st#Z}" = "$st" ]
}

# our_pid NAME: the recorded pid of a daemon slurm_up.sh started, if it still runs as that program.
our_pid() {
    local f=$PIDS/$1.pid pid
    [ -f "$f" ] || return 1
    pid=$(cat "$f")
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    alive "$pid" || return 1
    [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = "$1" ] || return 1
    echo "$pid"
}
