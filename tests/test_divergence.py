"""A run that goes wrong says so: seeds, grid cells and population members whose training goes
non-finite are caught once per chunk, stop counting, and leave only finite checkpoints; a run
whose every seed diverged ends with status `diverged` and its own exit code; a write that fails
(a full disk) reads as one line, its traceback in launch.log."""

from __future__ import annotations

import json
from dataclasses import replace
import math
import subprocess
import sys
import textwrap

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import ROOT, TINY, compose_config, launch, read_rows, read_summary, run_config, train_run
from ppo_lab.analysis.aggregate import run_aggregate
from ppo_lab.judging.closing import closing_lines
from ppo_lab.judging.health import HealthWarnings
from ppo_lab.config import validate
from ppo_lab.ppo.hypers import Hypers
from ppo_lab.ppo.train import (NONFINITE_GRADIENT, NONFINITE_LOSS, NONFINITE_STATE, LearnerState, make_optimizer,
                               nonfinite_code)
from ppo_lab.run.divergence import EXIT_DIVERGED
from ppo_lab.run.entry import train_cells
from ppo_lab.run.recorders import RunContext
from ppo_lab.rundir import MetricsCSV, RunSummary
from ppo_lab.rundir.checkpoints import verify
from ppo_lab.rundir.checkpoints import list_checkpoints

# Adam's step is about the learning rate whatever the gradient: 1e38 overflows float32 at once.
BLOW_UP = ["ppo.lr=1e38", "ppo.lr_final=1e38", "ppo.max_grad_norm=1e30"]


def _finite_checkpoint(run_dir) -> int:
    """The newest checkpoint's update, after checking that it verifies and every float in it is finite."""
    meta_path = list_checkpoints(run_dir / "checkpoints")[-1]
    meta, payload = verify(meta_path, meta_path.with_suffix(".msgpack"))
    leaves = [np.asarray(x) for x in _leaves(flax.serialization.msgpack_restore(payload))]
    floats = [x for x in leaves if np.issubdtype(x.dtype, np.floating)]
    assert floats and all(np.isfinite(x).all() for x in floats), "a checkpoint holds non-finite state"
    return meta["update"]


def _leaves(tree):
    if isinstance(tree, dict):
        for value in tree.values():
            yield from _leaves(value)
    else:
        yield tree


def _guard_state(params, opt_state) -> LearnerState:
    return LearnerState(params, opt_state, None, jnp.zeros(1), jnp.zeros(1), jnp.zeros(1, jnp.int32), jax.random.key(0))


@pytest.mark.parametrize("separate", [False, True])
@pytest.mark.parametrize("bad", [np.inf, np.nan])
def test_one_minibatchs_nonfinite_gradient_stays_in_adams_moments_through_the_clip(bad, separate):
    """The guard reads the gradients once per update, from Adam's moments: a non-finite gradient
    in an early minibatch, followed by finite ones, leaves them (and only them, at a sane step)
    non-finite, whichever clip the optimiser has."""
    cfg = run_config([*TINY, f"ppo.separate_grad_clip={str(separate).lower()}"])
    tx = make_optimizer(cfg.ppo, 10, Hypers.of(cfg.ppo))
    params = {"params": {"actor_torso": {"w": jnp.ones(3)}, "value_head": {"w": jnp.ones(2)}}}
    finite = jax.tree.map(lambda x: 0.1 * jnp.ones_like(x), params)
    broken = {"params": {"actor_torso": {"w": jnp.array([0.1, bad, 0.1])}, "value_head": {"w": jnp.full(2, 0.1)}}}
    state = tx.init(params)
    metrics = {"train/pg_loss": jnp.float32(0.1), "train/vf_loss": jnp.float32(0.2), "train/learning_rate": jnp.float32(1.0)}
    for grads in (finite, broken, finite, finite):
        updates, state = tx.update(grads, state, params)
        params = jax.tree.map(lambda p, u: p + 0.0 * jnp.nan_to_num(u), params, updates)  # the parameters kept finite
    assert int(nonfinite_code(metrics, _guard_state(params, state), None)) == NONFINITE_GRADIENT


def test_the_guard_names_each_kind_of_nonfinite_update():
    params = {"params": {"actor_torso": {"w": jnp.ones(3)}}}
    opt_state = {"mu": jnp.zeros(3), "count": jnp.zeros((), jnp.int32)}
    fine = {"train/pg_loss": jnp.float32(0.1), "train/approx_kl": jnp.float32(0.0)}
    assert int(nonfinite_code(fine, _guard_state(params, opt_state), None)) == 0
    # A loss term off the total (approx_kl) counts too; a metric that is not a loss term does not.
    assert int(nonfinite_code({**fine, "train/approx_kl": jnp.float32(np.inf)}, _guard_state(params, opt_state), None)) \
        == NONFINITE_LOSS
    assert int(nonfinite_code({**fine, "train/explained_variance": jnp.float32(np.nan)},
                              _guard_state(params, opt_state), None)) == 0
    blown = {"params": {"actor_torso": {"w": jnp.array([1.0, np.inf, 1.0])}}}
    assert int(nonfinite_code(fine, _guard_state(blown, opt_state), None)) == NONFINITE_STATE
    assert int(nonfinite_code(fine, _guard_state(params, {**opt_state, "mu": jnp.full(3, np.nan)}), None)) \
        == NONFINITE_GRADIENT


@pytest.mark.slow
def test_every_seed_diverged_stops_with_its_exit_code_and_a_relaunch_says_so(tmp_path):
    run_dir = tmp_path / "run"
    proc = launch([*TINY, *BLOW_UP], run_dir, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == EXIT_DIVERGED, out[-3000:]
    summary = read_summary(run_dir)
    assert summary["status"] == "diverged"
    [entry] = summary["diverged"]
    assert entry["seed"] == 0 and entry["update"] >= 1 and entry["metric"].startswith(("train/", "gradients", "parameters"))
    header = next(line for line in proc.stdout.splitlines() if line.startswith("== diverged"))
    assert entry["metric"] in header and "ppo.lr" in header and "ppo.max_grad_norm" in header
    # It stopped at the chunk it diverged in (8 updates a chunk); its rows end at the first bad update.
    assert summary["updates"] <= entry["update"] + 7
    assert max(int(r["update"]) for r in read_rows(run_dir)) == entry["update"]
    assert summary["eval"]["episode_return"] == [None] and summary["final"]["train/mean_episode_return"] == [None]
    assert _finite_checkpoint(run_dir) == summary["updates"]
    # The same command again: refused, with the same exit code, before training.
    again = launch([*TINY, *BLOW_UP], run_dir, check=False)
    assert again.returncode == EXIT_DIVERGED and "diverged" in again.stderr and "allow_config_change=true" in again.stderr
    assert read_summary(run_dir)["status"] == "diverged"
    # With a changed key (allowed) it goes on from the last finite checkpoint.
    resumed = train_run([*TINY, "ppo.lr=1e-3", "ppo.lr_final=0", "ppo.max_grad_norm=0.5", "allow_config_change=true"],
                        run_dir)
    assert resumed.status == "completed" and resumed.resumed_from == summary["updates"] and resumed.diverged == []
    assert math.isfinite(resumed.eval["episode_return"][0])


@pytest.mark.slow
def test_one_cell_of_a_grid_diverges_the_other_completes_and_aggregation_names_it(tmp_path, capsys):
    run_dirs = [tmp_path / "0", tmp_path / "1"]
    cells = [[*TINY, "num_seeds=2", "ppo.lr=1e-3"], [*TINY, "num_seeds=2", *BLOW_UP]]
    healthy, diverged = train_cells([compose_config(c) for c in cells], run_dirs)
    assert healthy.status == "completed" and healthy.diverged == [] and healthy.updates == 32
    assert all(math.isfinite(v) for v in healthy.eval["episode_return"])
    assert diverged.status == "diverged" and [e["seed"] for e in diverged.diverged] == [0, 1]
    assert diverged.updates <= 8  # stopped at the chunk it diverged in
    assert _finite_checkpoint(run_dirs[1]) == diverged.updates
    result = run_aggregate([tmp_path], quiet=True, plot=False)
    units = {(u.run.path.name, u.seed): u for u in result["collection"].units}
    assert all(units[("0", s)].used for s in (0, 1))
    assert all(units[("1", s)].status == "diverged" and not units[("1", s)].used for s in (0, 1))
    assert any(line.startswith("DIVERGED") and "non-finite" in line for line in result["problems"])


@pytest.mark.slow
def test_a_diverged_population_member_ranks_last_and_copies_a_healthy_one(tmp_path):
    run_dir = tmp_path / "pop"
    # Seed 0's members draw lr 5.7e22, 2.1e7, 5.3e-3 and 4.9e-4: member 0 overflows at once.
    summary = train_run([*TINY, "pbt.population=4", "pbt.interval_updates=4", "ppo.total_timesteps=1024",
                         "pbt.hypers.lr.high=1e38", "pbt.hypers.lr.low=1e-4"], run_dir)
    assert summary.status == "completed"
    first = json.loads((run_dir / "pbt.jsonl").read_text().splitlines()[0])
    assert first["update"] == 4 and 0 in first["diverged"]
    for member in first["diverged"]:  # every diverged member copied a healthy one, whatever pbt.fraction
        assert first["copied"][member] is not None and first["copied"][member] not in first["diverged"]
    updates = [int(r["update"]) for r in read_rows(run_dir) if int(r["member"]) == 0]
    assert min(u for u in updates if u > 4) == 5, "a replaced member counts again from the step on"
    assert max(u for u in updates if u <= 4) < 4, "a diverged member's rows end where it diverged"
    assert summary.pbt["best_member"] not in [e["seed"] for e in summary.diverged]
    _finite_checkpoint(run_dir)


def test_the_closing_summary_lists_what_the_health_checks_saw(tmp_path):
    cfg = validate(compose_config(TINY))
    summary = RunSummary()
    recorder = HealthWarnings(cfg.health)
    recorder.summary = summary
    collapse = {"train/entropy": 0.0, "train/approx_kl": 0.0, "train/clip_frac": 0.0}
    recorder.log_rows([{"update": u, "seed": s, **collapse} for u in (3, 4) for s in (0, 1)])
    recorder.log_rows([{"update": 9, "seed": 1, **collapse}, {"update": 9, "seed": 0, "train/entropy": 0.6}])
    assert summary.health["entropy collapse"] == {"seeds": [0, 1], "first_update": 3, "last_update": 9, "rows": 5}
    lines = closing_lines(replace(summary, status="completed", seeds=[0, 1],
                                  diverged=[{"seed": 1, "update": 12, "metric": "train/vf_loss"}]),
                          tmp_path, eval_mode="greedy", resume_command=None)
    assert "health warnings: entropy collapse on seeds 0, 1 (updates 3-9, 5 row(s))" in lines
    assert "diverged, left out of the values above: seed 1 at update 12 (train/vf_loss)" in lines


COLLAPSE = {"train/entropy": 0.0, "train/approx_kl": 0.0, "train/clip_frac": 0.0}
HEALTHY = {"train/entropy": 0.6, "train/approx_kl": 0.01, "train/clip_frac": 0.1}


def test_a_health_problem_is_warned_once_per_seed_until_it_clears(caplog):
    """A solved task's entropy stays collapsed: one warning per seed, not one per chunk."""
    recorder = HealthWarnings(run_config(TINY).health)
    caplog.set_level("INFO", logger="ppo_lab.judging.health")
    for first in range(1, 29, 4):  # 7 chunks, both seeds collapsed throughout
        recorder.log_rows([{"update": u, "seed": s, **COLLAPSE} for u in range(first, first + 4) for s in (0, 1)])
    recorder.log_rows([{"update": u, "seed": 0, **(HEALTHY if u == 32 else COLLAPSE)} for u in range(29, 33)])
    recorder.log_rows([{"update": u, "seed": 0, **COLLAPSE} for u in range(33, 37)])  # back again: said again
    warnings = [r.message for r in caplog.records if r.levelname == "WARNING"]
    assert [w.split(" in ")[0] for w in warnings] == ["health: entropy collapse on seed 0", "health: entropy collapse on seed 1",
                                                     "health: entropy collapse on seed 0"], warnings
    assert all(w.endswith("; not repeated until it clears") for w in warnings)
    assert [r.message for r in caplog.records if r.levelname == "INFO"] == ["health: entropy collapse on seed 0 cleared by update 32"]


def test_a_resumed_runs_health_counts_the_rows_it_kept(tmp_path):
    """summary.json's `health` over every row of metrics.csv, not only this launch's."""
    cfg = run_config(TINY)
    MetricsCSV(tmp_path / "metrics.csv").append(
        [{"update": u, "seed": 0, "timesteps": 64 * u, "wall_s": 0.1 * u, **COLLAPSE} for u in range(1, 5)])
    summary = RunSummary(health={"entropy collapse": {"seeds": [0], "first_update": 1, "last_update": 6,
                                                      "rows": 6}})  # an earlier launch's, past the checkpoint
    recorder = HealthWarnings(cfg.health)
    recorder.start(RunContext(tmp_path, cfg, summary, start_update=4, num_updates=8, batch_size=64,
                              windowed_return=lambda: math.nan))
    recorder.log_rows([{"update": u, "seed": 0, **COLLAPSE} for u in range(5, 9)])
    assert summary.health == {"entropy collapse": {"seeds": [0], "first_update": 1, "last_update": 8, "rows": 8}}


# launch.py as a user runs it, with one write failing as on a full disk: metrics.csv's append
# after the second chunk (its first two chunks, and their checkpoints, are written).
FULL_DISK = textwrap.dedent("""
    import errno, os, runpy, sys
    from ppo_lab.rundir import metrics

    append = metrics.MetricsCSV._append
    def full_disk(self, rows):
        if rows and rows[0]["update"] > 16:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        append(self, rows)
    metrics.MetricsCSV._append = full_disk
    sys.argv = ["launch.py", *sys.argv[1:]]
    runpy.run_path("launch.py", run_name="__main__")
""")


@pytest.mark.slow
def test_a_full_disk_reads_as_one_line_with_the_traceback_in_launch_log(tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-c", FULL_DISK, *TINY, "checkpoint.every_min=1e-9", f"hydra.run.dir={run_dir}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    line = f"error: OSError ENOSPC writing {run_dir / 'metrics.csv'}: No space left on device"
    tail = proc.stdout.splitlines()[-2:]
    assert tail[0] == line and tail[1] == f"resume (continues from the last checkpoint): ppo-lab resume {run_dir}", tail
    log = (run_dir / "launch.log").read_text()
    assert "Traceback" in log and "No space left on device" in log
    summary = read_summary(run_dir)
    assert summary["status"] == "failed" and summary["error"] == line.removeprefix("error: ")
    # Nothing written before is damaged: the rows of the first two chunks, a checkpoint that verifies.
    assert sorted({int(r["update"]) for r in read_rows(run_dir)}) == list(range(1, 17))
    assert _finite_checkpoint(run_dir) == 16, "a checkpoint past the rows written"
