#!/usr/bin/env bash
# The whole test suite as CI runs it: bring up the local single-node SLURM cluster (installing
# it on first use), run every test, and stop exactly the daemons this script started.
#
# The cluster needs root (it installs SLURM with apt and starts daemons). Without root, or with
# PPO_LAB_SKIP_CLUSTER=1, the cluster tests are skipped with one reason. Under CI=true a skipped
# cluster test fails the run (tests/conftest.py), so CI cannot pass without them.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${PPO_LAB_SKIP_CLUSTER:-0}" != "1" ] && [ "$(id -u)" != "0" ]; then
  export PPO_LAB_SKIP_CLUSTER=1
  export PPO_LAB_SKIP_CLUSTER_REASON="the local SLURM cluster needs root to install and start (tests/cluster/slurm_up.sh); running as $(id -un)"
fi
if [ "${PPO_LAB_SKIP_CLUSTER:-0}" != "1" ]; then
  trap 'bash tests/cluster/slurm_down.sh' EXIT
  bash tests/cluster/slurm_up.sh
fi

# Both cores: two pytest-xdist workers; tests/conftest.py groups what must share a worker (the
# SLURM cluster tests, a module's tests that share one fixture run). `--durations` keeps the
# suite's own timing visible. pytest exits 5 when it collects nothing; that must not pass
# silently.
python -m pytest -q -n "${PPO_LAB_TEST_WORKERS:-2}" --dist loadgroup --durations=25 "$@"
