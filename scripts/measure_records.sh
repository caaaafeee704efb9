#!/bin/bash
# The measurements behind the docs pages' blocks, and the records `ppo-lab docs` renders them from.
#
#   scripts/measure_records.sh NAME [NAME ...]     measure each into $OUT, then keep its records
#   scripts/measure_records.sh --keep NAME ...      only keep (the runs are already under $OUT)
#
# Run from the repository root. $OUT (default outputs/records) holds the runs; the small records
# (`ppo-lab record`) go under docs/records/<page>/, replacing what was there. Timings compare only
# runs of one machine measured together: run a NAME whole, on a machine nothing else loads.
# NAMEs and the blocks they fill:
#   readme        README.md closing-summary
#   cartpole      results.md cartpole (an empty compilation cache, then warm, then 4 and 64 envs)
#   memory        results.md memory-chain
#   continuous    results.md continuous-control
#   envpool       results.md envpool-learning
#   jumanji       results.md jumanji
#   rare_sweep    results.md rare-actions-grid, rare-actions-claims; performance.md grid-one-program
#   suite         performance.md gru-cost, outside-jax-speed (three interleaved rounds)
#   layout        performance.md layout-split (three interleaved rounds)
#   multihost     multihost.md multihost-speed (three interleaved rounds)
#   pbt_cartpole  pbt.md pbt-cost and, with pbt_bounds, pbt-against-random-search
#   pbt_bounds    pbt.md pbt-under-bounds
#   goodhart      goodhart.md goodhart-overoptimisation (and its figure), results.md goodhart-modes
#   goodhart_pbt  goodhart.md goodhart-one-level-up
#   goodhart_fidelity  goodhart.md goodhart-lab-recipe, goodhart-reference-recipe, goodhart-storage-tests
set -euo pipefail
OUT=${OUT:-outputs/records}
RECORDS=docs/records
L="python launch.py"
BOUNDS='{train/entropy: {min: 1.0}, train/approx_kl: {max: 0.06}, train/clip_frac: {max: 0.30}}'

keep() {  # keep FOLDER-UNDER-RECORDS RUN_DIR...: each run dir's record named by its folder
  local into=$RECORDS/$1; shift
  rm -rf "$into"
  ppo-lab record "$@" --points 10 --name-by-dir --into "$into"
}

measure_readme() {  # a run dir as a user's default one: outputs/runs/cartpole/<date>/<time>
  $L experiment=cartpole num_seeds=2 ppo.total_timesteps=200000 hydra.run.dir=$OUT/readme/outputs/runs/cartpole/$(date -u +%F/%H-%M-%S)
}
keep_readme() {
  local d; d=$(ls -td $OUT/readme/outputs/runs/cartpole/*/* | head -1)
  keep readme "$d" && mv $RECORDS/readme/$(basename "$d") $RECORDS/readme/cartpole_two_seeds
}

measure_cartpole() {
  local cache; cache=$(mktemp -d)
  $L experiment=cartpole num_seeds=4 hardware.compilation_cache_dir=$cache hydra.run.dir=$OUT/results/cartpole/cold
  $L experiment=cartpole num_seeds=4 hardware.compilation_cache_dir=$cache hydra.run.dir=$OUT/results/cartpole/warm
  $L experiment=cartpole num_seeds=4 ppo.num_envs=4 hardware.compilation_cache_dir=$cache hydra.run.dir=$OUT/results/cartpole/envs_4
  $L experiment=cartpole num_seeds=4 ppo.num_envs=64 hardware.compilation_cache_dir=$cache hydra.run.dir=$OUT/results/cartpole/envs_64
  rm -rf "$cache"
}

measure_memory() {  # seeds 100-107: none of them set the preset
  $L experiment=memory_chain num_seeds=8 seed=100 hydra.run.dir=$OUT/results/memory/gru
  $L experiment=memory_chain num_seeds=8 seed=100 network.recurrent=lstm hydra.run.dir=$OUT/results/memory/lstm
  $L experiment=memory_chain num_seeds=8 seed=100 network.recurrent=null hydra.run.dir=$OUT/results/memory/feed_forward
}

measure_continuous() {
  $L experiment=pendulum num_seeds=4 hydra.run.dir=$OUT/results/continuous/pendulum
  $L experiment=brax_inverted_pendulum num_seeds=4 hydra.run.dir=$OUT/results/continuous/brax_inverted_pendulum
}

measure_envpool() {
  local cartpole="env=envpool env.id=CartPole-v1 num_seeds=2 ppo.num_envs=16 ppo.num_steps=128 ppo.lr=2.5e-3 ppo.total_timesteps=500000"
  $L $cartpole hydra.run.dir=$OUT/results/envpool/cartpole_2_devices
  $L $cartpole hardware.host_devices=1 hydra.run.dir=$OUT/results/envpool/cartpole_1_device
  $L experiment=coinrun ppo.num_envs=8 ppo.num_steps=32 ppo.total_timesteps=1280 num_seeds=1 hydra.run.dir=$OUT/results/envpool/coinrun
}

measure_jumanji() {
  $L experiment=game2048 num_seeds=2 hydra.run.dir=$OUT/results/jumanji/game2048
  $L experiment=maze num_seeds=2 hydra.run.dir=$OUT/results/jumanji/maze
  $L env=jumanji env.id=Knapsack-v1 num_seeds=2 ppo.num_envs=64 ppo.num_steps=64 ppo.lr=1e-3 ppo.total_timesteps=300000 \
    hydra.run.dir=$OUT/results/jumanji/knapsack
}

keep_results() { local x; for x in "$@"; do keep results/$x $OUT/results/$x/*; done; }
keep_cartpole() { keep_results cartpole; }
keep_memory() { keep_results memory; }
keep_continuous() { keep_results continuous; }
keep_envpool() { keep_results envpool; }
keep_jumanji() { keep_results jumanji; }

measure_rare_sweep() {  # the tuning spec's grid with each launcher, the compilation cache off, each under /usr/bin/time
  mkdir -p $OUT/results
  /usr/bin/time -v -o $OUT/results/rare_sweep_basic.time $L -cd sweeps -cn rare_actions \
    hardware.compilation_cache_dir=null hydra.sweep.dir=$OUT/results/rare_sweep/basic
  /usr/bin/time -v -o $OUT/results/rare_sweep_vmap.time $L -cd sweeps -cn rare_actions hydra/launcher=vmap \
    hardware.compilation_cache_dir=null hydra.sweep.dir=$OUT/results/rare_sweep/vmap
}
keep_rare_sweep() {
  local launcher
  for launcher in basic vmap; do
    keep results/rare_sweep/$launcher $OUT/results/rare_sweep/$launcher --column train/mean_episode_return \
      --column train/entropy --column train/vf_loss --column train/pg_loss --column train/approx_kl --column train/clip_frac
    cp $OUT/results/rare_sweep_$launcher.time $RECORDS/results/rare_sweep/$launcher.time
  done
}

measure_suite() {  # the GRU's cost and the envs outside JAX, three rounds interleaved
  mkdir -p $OUT/performance/suite
  local r
  for r in 1 2 3; do
    ppo-lab benchmark --no-processes --envs cartpole,foraging --out $OUT/performance/suite/gru_round$r.json
    ppo-lab benchmark --no-processes --envs cartpole,envpool:CartPole-v1,gymnasium:CartPole-v1 ppo.num_envs=16 ppo.num_steps=128 \
      --out $OUT/performance/suite/outside_jax_round$r.json
  done
}
keep_suite() { rm -rf $RECORDS/performance/suite; mkdir -p $RECORDS/performance/suite; cp $OUT/performance/suite/*_round*.json $RECORDS/performance/suite/; }

measure_layout() {  # one seed's envs split over 2 devices against one device, at 4 and 64 envs, three rounds
  local r n lay
  for r in 1 2 3; do for n in 4 64; do for lay in single envs; do
    $L experiment=cartpole num_seeds=1 benchmark=true ppo.num_envs=$n hardware.layout=$lay hydra.run.dir=$OUT/performance/layout/envs${n}_${lay}_r$r
  done; done; done
}
keep_layout() { keep performance/layout $OUT/performance/layout/*; }

measure_multihost() {  # 1 process x 2 devices against 2 processes x 1 device (CPUs split, and not), three rounds
  local b="experiment=cartpole num_seeds=4 benchmark=true ppo.total_timesteps=1000000" r split i port
  for r in 1 2 3; do
    $L $b hydra.run.dir=$OUT/performance/multihost/one_process_r$r
    for split in true false; do
      port=$((12400 + r * 10 + ${#split}))
      for i in 0 1; do
        $L $b hardware.host_devices=1 hardware.coordinator_address=127.0.0.1:$port hardware.num_processes=2 hardware.process_id=$i \
          hardware.split_host_cpus=$split hydra.run.dir=$OUT/performance/multihost/two_processes_split_${split}_r$r &
      done
      wait
    done
  done
}
keep_multihost() { keep performance/multihost $OUT/performance/multihost/*; }

measure_pbt_cartpole() {  # 8 populations each way, each a process of its own, PBT's and random search's interleaved
  local s exploit
  for s in 0 8 16 24 32 40 48 56; do for exploit in true false; do
    $L experiment=cartpole num_seeds=1 pbt.population=8 pbt.exploit=$exploit seed=$s \
      hydra.run.dir=$OUT/pbt/cartpole/$([ $exploit = true ] && echo pbt || echo random_search)/$s
  done; done
}
keep_pbt_cartpole() { local arm; for arm in pbt random_search; do keep pbt/cartpole/$arm $OUT/pbt/cartpole/$arm; done; }

measure_pbt_bounds() {  # seeds 100-163: none of them chose the explored range
  local seeds=seed=100,108,116,124,132,140,148,156
  $L -m experiment=rare_actions pbt.population=8 $seeds pbt.exploit=false "pbt.constraints=$BOUNDS" hydra.sweep.dir=$OUT/pbt/bounds/random_search
  $L -m experiment=rare_actions pbt.population=8 $seeds pbt.exploit=true hydra.sweep.dir=$OUT/pbt/bounds/pbt_on_return
  $L -m experiment=rare_actions pbt.population=8 $seeds pbt.exploit=true "pbt.constraints=$BOUNDS" hydra.sweep.dir=$OUT/pbt/bounds/pbt_under_bounds
}
keep_pbt_bounds() { local arm; for arm in random_search pbt_on_return pbt_under_bounds; do keep pbt/bounds/$arm $OUT/pbt/bounds/$arm; done; }

GOODHART_MODES="ground_truth ground_truth_blind ground_truth_blinded proxy_mortal proxy"
measure_goodhart() {  # the five modes as sweeps/goodhart.yaml runs them (8 seeds vmapped), one run per mode
  local mode
  for mode in $GOODHART_MODES; do
    $L experiment=goodhart_cpu reward=$mode seed=0 num_seeds=8 hydra.run.dir=$OUT/goodhart/overoptimisation/$mode
  done
}
keep_goodhart() { keep goodhart/overoptimisation $OUT/goodhart/overoptimisation/*; }

measure_goodhart_pbt() {  # populations of 8 under reward=proxy, four a side: random search, PBT on pay, PBT on the truth
  local lr='pbt.hypers={lr: {low: 1e-4, high: 1e-2, log: true}}' b="experiment=goodhart_cpu reward=proxy pbt.population=8 seed=0,8,16,24"
  $L -m $b "$lr" pbt.exploit=false hydra.sweep.dir=$OUT/goodhart/one_level_up/proxy_rs
  $L -m $b "$lr" pbt.fitness=reward/paid_per_1k hydra.sweep.dir=$OUT/goodhart/one_level_up/proxy_pay
  $L -m $b "$lr" pbt.fitness=true/objective_per_1k hydra.sweep.dir=$OUT/goodhart/one_level_up/proxy_true
}
keep_goodhart_pbt() { local arm; for arm in proxy_rs proxy_pay proxy_true; do keep goodhart/one_level_up/$arm $OUT/goodhart/one_level_up/$arm; done; }

measure_goodhart_fidelity() {  # the two modes the reference loses, float32 against uint8 storage in either recipe
  $L -cd sweeps -cn goodhart_fidelity +fidelity=lab,lab_uint8,reference,reference_float32 reward=ground_truth_blinded,proxy_mortal \
    hydra.sweep.dir=$OUT/goodhart/fidelity
}
keep_goodhart_fidelity() { keep goodhart/fidelity $OUT/goodhart/fidelity; }

only_keep=false
if [ "${1:-}" = --keep ]; then only_keep=true; shift; fi
[ $# -gt 0 ] || { sed -n '2,25p' "$0"; exit 2; }
for name in "$@"; do
  declare -F measure_$name > /dev/null || { echo "no measurement $name; valid: $(declare -F | sed -n 's/.*measure_//p' | tr '\n' ' ')" >&2; exit 2; }
done
for name in "$@"; do
  $only_keep || measure_$name
  keep_$name
done
