#!/usr/bin/env bash
# The whole test suite as CI runs it: bring up the local single-node SLURM cluster (installing
# it on first use), run every test, and stop exactly the daemons this script started.
# Set PPO_LAB_SKIP_CLUSTER=1 to run without the cluster (its tests then skip, saying why).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${PPO_LAB_SKIP_CLUSTER:-0}" != "1" ]; then
  trap 'bash tests/cluster/slurm_down.sh' EXIT
  bash tests/cluster/slurm_up.sh
fi

# pytest exits 5 when it collects nothing; that must not pass silently.
python -m pytest -q --durations=15 "$@"
