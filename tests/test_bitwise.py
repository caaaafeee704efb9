"""Nothing changes for users, bit for bit: five tiny configs train to the metrics.csv and final
evaluation recorded in tests/fixtures/bitwise/<cpu_id>/, one set per CPU (tests/cpu_recordings.py:
another CPU moves the last digits). The recordings are 1.0's, made on one CPU (an AMD EPYC with
AVX-512); on any other CPU the test takes cpu_recordings' fallback (within RTOL/ATOL of that
set, with a warning) until that CPU records its own set.

Every column of every row is compared exactly, except the wall-clock ones. To record this CPU's
set (a new CPU; or anew, only when a change of numbers is intended and explained):

    PPO_LAB_RECORD_BITWISE=1 python -m pytest tests/test_bitwise.py
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from conftest import TINY, compose_config, read_summary, train_run
from cpu_recordings import ATOL, RTOL, Outcome, record_into, recording_asked, require_reproduced
from ppo_lab.judging.reproduction import close, same
from ppo_lab.run.entry import train_cells
from ppo_lab.rundir import RunSummary

# Recorded runs trained end to end, compared with recordings made by an optimised XLA build (as
# a user's run compiles).
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("optimised_xla")]

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "bitwise"

SMALL = ["ppo.num_envs=4", "ppo.num_steps=16", "ppo.num_minibatches=2", "ppo.update_epochs=2",
         "train.chunk_updates=4", "hardware.host_devices=1"]

RUNS = {
    "cartpole": ["experiment=cartpole", *TINY],
    "foraging": ["env=foraging", "env.grid_size=16", "env.food_min=4", "env.food_max=8", "env.poison_min=4",
                 "env.poison_max=8", "env.max_steps=32", *SMALL, "ppo.total_timesteps=512", "eval.episodes=2",
                 "++eval.survival_envs=4", "++eval.survival_steps=32"],
    "memory_chain_gru": ["experiment=memory_chain", *SMALL, "ppo.total_timesteps=768", "num_seeds=2",
                         "eval.episodes=4"],
    "pendulum_normalized": ["experiment=pendulum", *SMALL, "ppo.total_timesteps=1024", "ppo.normalize_obs=true",
                            "ppo.normalize_reward=true", "eval.episodes=2", "eval.max_steps=50"],
}
# The rare-action grid as hydra/launcher=vmap trains it: two cells (learning rates) x 2 seeds in one program.
GRID = ["experiment=rare_actions", *SMALL, "ppo.auto_scale_reference_batch=64", "ppo.total_timesteps=1024",
        "num_seeds=2", "eval.episodes=4"]
GRID_CELLS = {"rare_actions_grid_lr5e-4": ["ppo.lr=5e-4"], "rare_actions_grid_lr2e-3": ["ppo.lr=2e-3"]}


def _is_wall(column: str) -> bool:
    return column.startswith("perf/") or "wall" in column


def _rows(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return [{k: v for k, v in row.items() if not _is_wall(k)} for row in csv.DictReader(f)]


def _number(cell: str):
    """A metrics.csv cell as a float where it is one (the comparison's `close` takes numbers)."""
    try:
        return float(cell)
    except ValueError:
        return cell


def _compare(rows: list[dict], final_eval: dict, recorded: Path) -> Outcome:
    """The run against one recording: identical, or every value within RTOL/ATOL, or neither."""
    expected = _rows(recorded / "metrics.csv")
    if list(rows[0]) != list(expected[0]) or len(rows) != len(expected):
        return Outcome(False, False, f"{len(rows)} rows of {list(rows[0])}, recorded {len(expected)} of {list(expected[0])}")
    recorded_eval = json.loads((recorded / "eval.json").read_text())
    diffs = [(i, want.get("update"), want.get("seed"), k, row[k], want[k])
             for i, (row, want) in enumerate(zip(rows, expected)) for k in want if row[k] != want[k]]
    eval_diffs = [(k, a, b) for k in sorted(set(final_eval) | set(recorded_eval))
                  for a, b in zip(final_eval.get(k, [None]), recorded_eval.get(k, [])) if not same(a, b)]
    if not diffs and not eval_diffs and set(final_eval) == set(recorded_eval):
        return Outcome(True, True, "")
    within = all(close(_number(a), _number(b), RTOL, ATOL) for *_, a, b in diffs) and \
        all(close(a, b, RTOL, ATOL) for _, a, b in eval_diffs)
    first = (f"row {diffs[0][0]} (update {diffs[0][1]}, seed {diffs[0][2]}) {diffs[0][3]}: {diffs[0][4]} vs recorded "
             f"{diffs[0][5]}" if diffs else f"final evaluation {eval_diffs[:3]}")
    return Outcome(False, within, f"{len(diffs)} value(s) differ, first {first}")


def _check(name: str, run_dir: Path) -> None:
    rows, final_eval = _rows(run_dir / "metrics.csv"), read_summary(run_dir)["eval"]
    if recording_asked():
        target = record_into(FIXTURES) / name
        target.mkdir(parents=True, exist_ok=True)
        with (target / "metrics.csv").open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        (target / "eval.json").write_text(json.dumps(final_eval, indent=1, sort_keys=True) + "\n")
        return
    require_reproduced(FIXTURES, name, lambda recorded: _compare(rows, final_eval, recorded))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", list(RUNS))
def test_a_run_trains_as_recorded(name, tmp_path):
    train_run(RUNS[name], tmp_path / name)
    _check(name, tmp_path / name)


@pytest.mark.timeout(600)
def test_the_rare_action_grid_trains_as_recorded(tmp_path):
    names = list(GRID_CELLS)
    cfgs = [compose_config([*GRID, *GRID_CELLS[n]]) for n in names]
    results = train_cells(cfgs, [tmp_path / n for n in names])
    for name, result in zip(names, results):
        assert isinstance(result, RunSummary) and result.status == "completed", result
        _check(name, tmp_path / name)
