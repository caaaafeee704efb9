#!/bin/bash
# One run across processes at full size, by hand (minutes; the suite's tests/test_multihost.py runs it tiny):
#   bash tests/multihost_bar.sh OUT_DIR
# experiment=cartpole num_seeds=4 as 2 processes x 1 device and as 1 process x 2 devices; then the
# 2 processes with process 1 SIGKILLed after the first checkpoint, and both relaunched.
# Prints exit codes and times; compare OUT_DIR/two and OUT_DIR/one's metrics.csv and summary.json.
set -u
OUT=${1:?usage: multihost_bar.sh OUT_DIR}; mkdir -p "$OUT"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}; export PYTHONUNBUFFERED=1
A="experiment=cartpole num_seeds=4"
port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
two() {  # two processes into run dir $1, extra overrides after it; sets PID0 PID1
  local dir=$1 p; shift; p=$(port)
  for i in 0 1; do
    $PY launch.py $A hardware.host_devices=1 hardware.coordinator_address=127.0.0.1:$p hardware.num_processes=2 \
      hardware.process_id=$i hydra.run.dir="$dir" "$@" > "$dir.p$i.$p.out" 2>&1 &
    eval "PID$i=\$!"
  done
}
stop_all() { kill -9 $PID0 $PID1 2>/dev/null; }
trap stop_all EXIT
t0=$(date +%s.%N); two "$OUT/two"; wait $PID0; e0=$?; wait $PID1; e1=$?
echo "2 processes: exit $e0 $e1, $(echo "$(date +%s.%N) - $t0" | bc) s"
t0=$(date +%s.%N); $PY launch.py $A hardware.host_devices=2 hydra.run.dir="$OUT/one" > "$OUT/one.out" 2>&1
echo "1 process x 2 devices: exit $?, $(echo "$(date +%s.%N) - $t0" | bc) s"
K="checkpoint.every_min=0.02 hardware.init_timeout_s=30"
two "$OUT/kill" $K
until ls "$OUT"/kill/checkpoints/*.json > /dev/null 2>&1; do sleep 0.2; kill -0 $PID0 || break; done
kill -9 $PID1; t0=$(date +%s.%N)
( sleep 150; kill -9 $PID0 2> /dev/null ) & W=$!
wait $PID0; e0=$?; kill $W 2> /dev/null
echo "process 1 killed: process 0 exit $e0 after $(echo "$(date +%s.%N) - $t0" | bc) s"
two "$OUT/kill" $K; wait $PID0; e0=$?; wait $PID1; e1=$?
echo "relaunched: exit $e0 $e1; summary: $(grep -o '"resumed_from": [0-9]*' "$OUT/kill/summary.json")"
