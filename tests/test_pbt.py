"""Population-based training (pbt.*, docs/pbt.md): validation, the ranking under bounds on
hand-made members, one tiny population run under bounds that several tests read, the exploit
step's state copy, and a SIGKILL + relaunch that resumes exactly."""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections import Counter
from pathlib import Path

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import TINY, launch, log_messages, read_rows, read_summary, run_config, start_launch, train_run
from ppo_lab.analysis.aggregate import run_aggregate
from ppo_lab.config import Bound
from ppo_lab.errors import ConfigError
from ppo_lab.run.population import Population, gather, lineage
from ppo_lab.run.selection import Standing, violation

# 4 members, a step every 4 updates (chunks of 8 cut to 4), 64 updates: 15 steps. Under two
# bounds: with seed 0's draws the members whose lr is near 1e-5 barely move (approx_kl below the
# bound) while the fastest learner may not lead on return, so the bound changes who is copied;
# clip_frac's bound holds throughout (a bound every member meets changes nothing).
KL_MIN = 0.0005
CONSTRAINTS = f"pbt.constraints={{train/approx_kl: {{min: {KL_MIN}}}, train/clip_frac: {{max: 0.5}}}}"
POPULATION = [*TINY, "pbt.population=4", "pbt.interval_updates=4", "ppo.total_timesteps=4096",
              "checkpoint.every_min=0.0001", CONSTRAINTS]


def test_off_by_default():
    assert run_config(TINY).pbt is None


@pytest.mark.parametrize("override, key, says", [
    ("+pbt.hypers.num_envs={low:1,high:8,log:false}", "pbt.hypers.num_envs", "an explorable key, one of ['lr'"),
    ("pbt.hypers.lr.low=0.5", "pbt.hypers.lr.low", "a value below high (0.1)"),
    ("pbt.hypers.lr.low=0", "pbt.hypers.lr.low", "a value > 0 with log: true"),
    ("pbt.fraction=0.6", "pbt.fraction", "a fraction in (0, 0.5]"),
    ("pbt.fraction=0", "pbt.fraction", "a fraction in (0, 0.5]"),
    ("num_seeds=2", "num_seeds", "1 with pbt.population=4"),
    ("pbt.fitness_mode=best", "pbt.fitness_mode", "one of ['max', 'min']"),
    ("pbt.constraints={train/entropy: {}}", "pbt.constraints.train/entropy", "{min: NUMBER} and/or {max: NUMBER}"),
    ("pbt.constraints={train/entropy: {min: null}}", "pbt.constraints.train/entropy", "not both null"),
    ("pbt.constraints={train/entropy: {min: 2, max: 1}}", "pbt.constraints.train/entropy.min", "a value <= max (1.0)"),
    ("pbt.constraints={train/entropy: {mn: 1}}", "pbt.constraints.train/entropy.mn", "known keys ['max', 'min']"),
    ("pbt.constraints={train/entropy: 1.0}", "pbt.constraints.train/entropy", "{min: NUMBER} and/or {max: NUMBER}"),
    ("pbt.constraints={entropy: {min: 1}}", "pbt.constraints", "logged metrics as keys"),
])
def test_bad_population_refused_with_the_valid_range(override, key, says):
    with pytest.raises(ConfigError) as err:
        run_config([*TINY, "pbt.population=4", override])
    assert err.value.key == key and says in str(err.value)


def test_bounds_and_fitness_mode_are_read():
    pbt = run_config([*TINY, "pbt.population=4", "pbt.fitness_mode=min", "pbt.fitness=train/approx_kl",
                      "pbt.constraints={train/entropy: {min: 1}, train/clip_frac: {min: 0, max: 0.3}}"]).pbt
    assert pbt.fitness_mode == "min" and pbt.fitness == "train/approx_kl"
    assert pbt.constraints == {"train/entropy": Bound(1.0, None), "train/clip_frac": Bound(0.0, 0.3)}
    assert run_config([*TINY, "pbt.population=4"]).pbt.constraints == {}  # null: no bound


def test_the_rare_action_game_explores_its_entropy_coefficient_and_resamples():
    """docs/pbt.md's bounded runs name only the bounds: the game's own exploration is in its
    experiment, and a population on it explores the entropy coefficient beside lr."""
    pbt = run_config(["experiment=rare_actions", "pbt.population=8"]).pbt
    assert set(pbt.hypers) == {"lr", "ent_coef_initial"}
    assert (pbt.hypers["ent_coef_initial"].low, pbt.hypers["ent_coef_initial"].high) == (0.03, 0.3)
    assert pbt.perturb.resample_prob == 0.25


def test_a_population_of_one_refused():
    with pytest.raises(ConfigError, match="0 \\(off\\) or an integer >= 2"):
        run_config([*TINY, "pbt.population=1"])


def test_untraced_key_exits_2_before_compiling(tmp_path):
    proc = launch([*TINY, "pbt.population=4", "+pbt.hypers.num_envs={low:1,high:8,log:false}"], tmp_path / "r", check=False)
    assert proc.returncode == 2
    assert "pbt.hypers.num_envs" in proc.stderr + proc.stdout and "ent_coef_initial" in proc.stderr + proc.stdout
    assert not (tmp_path / "r" / "metrics.csv").exists()


def test_a_fitness_the_run_does_not_log_is_refused_before_compiling_or_writing(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    with pytest.raises(ConfigError) as err:
        train_run([*TINY, "pbt.population=2", "pbt.fitness=train/mean_episode_retrun"], tmp_path / "r")
    assert err.value.key == "pbt.fitness" and "train/mean_episode_return" in err.value.valid
    assert "compiled one chunk" not in caplog.text  # traced only: XLA compiled nothing
    assert not (tmp_path / "r" / "config.yaml").exists() and not (tmp_path / "r" / "metrics.csv").exists()


def test_a_constrained_metric_the_run_does_not_log_is_refused_naming_the_logged_ones(tmp_path):
    population = Population(run_config([*TINY, "pbt.population=2", "pbt.constraints={train/entropi: {min: 1}}"]), tmp_path)
    logged = ["train/approx_kl", "train/entropy", "train/mean_episode_return"]
    with pytest.raises(ConfigError) as err:
        population.check_fitness(logged)
    assert err.value.key == "pbt.constraints" and err.value.value == "train/entropi"
    assert "train/entropy" in err.value.valid and "train/mean_episode_return" in err.value.valid


def test_a_bound_on_a_metric_the_run_does_not_log_exits_2_naming_it(tmp_path):
    proc = launch([*TINY, "pbt.population=2", "pbt.constraints={train/entropi: {min: 0.5}}"], tmp_path / "r", check=False)
    assert proc.returncode == 2
    assert "pbt.constraints='train/entropi'" in proc.stderr and "train/entropy" in proc.stderr
    assert not (tmp_path / "r" / "metrics.csv").exists()


ENTROPY, KL = "train/entropy", "train/approx_kl"
BOUNDS = {ENTROPY: Bound(1.0, None), KL: Bound(None, 0.06)}


def test_members_that_meet_every_bound_rank_above_the_rest_by_fitness():
    values = [{ENTROPY: 1.5, KL: 0.01},   # 0: meets both
              {ENTROPY: 0.5, KL: 0.01},   # 1: entropy half its bound under: violation 0.5
              {ENTROPY: 1.2, KL: 0.03},   # 2: meets both
              {ENTROPY: 0.9, KL: 0.066}]  # 3: 0.1 + 0.1 = 0.2
    standing = Standing([5.0, 9.0, 3.0, 8.0], values, BOUNDS)
    assert standing.feasible == [True, False, True, False]
    assert standing.violations == pytest.approx([0, 0.5, 0, 0.2])
    # The best return (member 1) is the worst here: it misses its bound by the most.
    assert standing.worst_first() == [1, 3, 2, 0] and standing.best() == 0
    # Lower fitness is better with fitness_mode=min; bounds still come first.
    assert Standing([5.0, 9.0, 3.0, 8.0], values, BOUNDS, "min").worst_first() == [1, 3, 0, 2]
    # No bounds: fitness alone, as before bounds existed (ties: the lower index ranks lower, and is the best).
    assert Standing([5.0, 9.0, 3.0, 8.0], [{}] * 4, {}).worst_first() == [2, 0, 3, 1]
    assert Standing([1.0, 2.0, 2.0], [{}] * 3, {}).worst_first() == [0, 1, 2]
    assert Standing([1.0, 2.0, 2.0], [{}] * 3, {}).best() == 1


def test_no_member_feasible_ranks_by_violation_and_diverged_members_last():
    values = [{ENTROPY: 0.2, KL: 0.01}, {ENTROPY: 0.9, KL: 0.01}, {ENTROPY: float("nan"), KL: 0.01},
              {ENTROPY: 0.95, KL: 0.01}]
    standing = Standing([1.0, 2.0, 9.0, 3.0], values, BOUNDS, diverged={3})
    # Member 2 logged no finite entropy: nothing shows it met the bound (infinite violation).
    assert standing.feasible == [False] * 4 and standing.violations[2] == float("inf")
    assert standing.worst_first() == [3, 2, 0, 1] and standing.best() == 1
    # Equal violation: the better fitness ranks higher; NaN fitness below any.
    tied = Standing([float("nan"), 1.0, 4.0], [{ENTROPY: 0.5}] * 3, {ENTROPY: Bound(1.0, None)})
    assert tied.worst_first() == [0, 1, 2]


def test_violation_is_scaled_by_its_bound():
    assert violation(0.09, Bound(None, 0.06)) == pytest.approx(0.5)
    assert violation(-3.0, Bound(-2.0, None)) == pytest.approx(0.5)
    assert violation(-0.5, Bound(0.0, None)) == pytest.approx(0.5)  # a bound at 0: in the metric's units
    assert violation(1.0, Bound(0.0, 2.0)) == 0.0
    assert violation(float("nan"), Bound(0.0, None)) == float("inf")


def test_the_bottom_copies_a_feasible_member_over_a_better_return(tmp_path):
    population = Population(run_config([*TINY, "pbt.population=4", CONSTRAINTS]), tmp_path)
    rows = [{"seed": m, "train/mean_episode_return": r, KL: kl, "train/clip_frac": 0.1}
            for m, r, kl in ((0, 50.0, 0.001), (1, 90.0, 0.0001), (2, 10.0, 0.002), (3, 20.0, 0.0001))]
    population.annotate(rows)
    standing = population.standing(population.fitness(), population.bounded())
    assert standing.feasible == [True, False, True, False]
    copied = population.choose(standing, np.random.default_rng(0))
    assert copied == [None, None, None, 0]  # member 3 (further under the bound) copies member 0, not 1


@flax.struct.dataclass
class _State:
    params: jnp.ndarray
    key: jnp.ndarray


def test_gather_copies_the_state_and_keeps_each_key():
    state = _State(params=jnp.arange(4.0)[:, None] * jnp.ones((4, 3)), key=jnp.arange(4))
    copied = gather(state, np.asarray([0, 3, 2, 3]))
    assert np.asarray(copied.params)[:, 0].tolist() == [0, 3, 2, 3]
    assert np.asarray(copied.key).tolist() == [0, 1, 2, 3]


def test_an_exploit_step_never_compiles(tmp_path):
    """After `compile_gather` (before training), steps copy and perturb without compiling anything."""
    population = Population(run_config(POPULATION), tmp_path)
    state = _State(params=jnp.arange(4.0)[:, None] * jnp.ones((4, 3)), key=jnp.arange(4))
    assert population.compile_gather(state) > 0
    with log_messages("jax") as compiles, jax.log_compiles():
        for update in (4, 8, 12):
            population.annotate([{"seed": m, "train/mean_episode_return": float(m), KL: 0.001, "train/clip_frac": 0.1}
                                 for m in range(4)])
            state, _ = population.step(update, state)
    assert not [m for m in compiles if m.startswith("Compiling")], compiles
    assert np.asarray(state.params)[:, 0].tolist() == [3, 1, 2, 3]  # member 0 (the worst) copied member 3


def test_lineage_follows_the_copies_back():
    steps = [{"update": 4, "copied": [None, 0, None]}, {"update": 8, "copied": [1, None, None]}]
    assert lineage(steps, 0, 12) == [{"member": 0, "from_update": 0, "until_update": 4},
                                     {"member": 1, "from_update": 4, "until_update": 8},
                                     {"member": 0, "from_update": 8, "until_update": 12}]


def test_members_that_tie_stay_where_they_are(tmp_path):
    """A solved task: every member at the maximum, apart by float rounding. None copies another;
    a member clearly behind, or one that diverged, still does."""
    population = Population(run_config(POPULATION), tmp_path)
    rng = lambda: np.random.default_rng(0)  # noqa: E731
    within = [{"train/approx_kl": 0.01, "train/clip_frac": 0.1}] * 4  # every member meets the bounds

    def choose(fitness, diverged=frozenset()):
        return population.choose(population.standing(np.array(fitness), within, diverged), rng())

    assert choose([500.0, 500.0, 500.0 * (1 - 1e-8), 500.0]) == [None] * 4
    behind = choose([500.0, 500.0, 20.0, 500.0])
    assert behind[2] is not None and behind.count(None) == 3
    assert choose([500.0] * 4, diverged=frozenset({1}))[1] is not None
    # Equal fitness but not alike on the bounds: the member that missed one copies
    missed = [*within[:2], {"train/approx_kl": 0.0, "train/clip_frac": 0.1}, within[3]]
    assert population.choose(population.standing(np.array([500.0] * 4), missed), rng())[2] is not None


@pytest.fixture(scope="module")
def population_run(tmp_path_factory) -> Path:
    """The population run several tests read, with W&B (offline) and TensorBoard on to check
    them too (MLflow: tests/test_mlflow.py, on the store that module shares: creating one costs seconds)."""
    run_dir = tmp_path_factory.mktemp("pbt") / "run"
    train_run([*POPULATION, "logger=[csv,wandb,tensorboard]"], run_dir)
    return run_dir


def _steps(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "pbt.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_rows_per_update_and_member_with_their_hyperparameters(population_run):
    rows = read_rows(population_run)
    assert Counter((r["update"], r["member"]) for r in rows) == {(str(u), str(m)): 1 for u in range(1, 65) for m in range(4)}
    steps = _steps(population_run)
    by_key = {(int(r["update"]), int(r["member"])): float(r["pbt/lr"]) for r in rows}
    # A member trains the update after a step with the hyperparameters that step gave it.
    for step in steps:
        for member, values in enumerate(step["hypers"]):
            assert by_key[(step["update"] + 1, member)] == pytest.approx(values["lr"], rel=1e-6)
    assert np.asarray([float(r["train/learning_rate"]) > 0 for r in rows]).all()


@pytest.mark.slow
def test_one_line_per_exploit_step_with_each_members_bounded_values(population_run):
    steps = _steps(population_run)
    rows = read_rows(population_run)
    assert [s["update"] for s in steps] == list(range(4, 64, 4))
    overruled = 0  # steps where a bound made the copied member other than the best return
    for step in steps:
        [(copier, source)] = [(m, c) for m, c in enumerate(step["copied"]) if c is not None]  # a quarter of 4
        fitness = [-np.inf if f is None else f for f in step["fitness"]]
        for member in range(4):  # each bounded metric: the member's mean over the updates since the last step
            window = [float(r[KL]) for r in rows if r["member"] == str(member) and step["update"] - 4 < int(r["update"]) <= step["update"]]
            assert step["constraints"][member][KL] == pytest.approx(np.mean(window), rel=1e-6)
            assert step["feasible"][member] == (step["constraints"][member][KL] >= KL_MIN)
        feasible = [m for m in range(4) if step["feasible"][m]]
        if feasible:
            assert source == max(feasible, key=lambda m: fitness[m]) and source in feasible
        if len(feasible) < 4:
            assert copier not in feasible
        overruled += source != int(np.argmax(fitness))
    assert overruled and not all(all(s["feasible"]) for s in steps)


@pytest.mark.slow
def test_summary_names_the_best_member_and_its_lineage(population_run):
    s = read_summary(population_run)
    assert s["status"] == "completed" and s["pbt"]["population"] == 4 and s["pbt"]["steps"] == 15
    pbt = s["pbt"]
    assert [c[KL] >= KL_MIN for c in pbt["constraints"]] == pbt["feasible"]
    assert pbt["best_feasible"] == any(pbt["feasible"])
    ranked = [m for m in range(4) if pbt["feasible"][m]] or list(range(4))
    if any(pbt["feasible"]):
        assert pbt["best_member"] == max(ranked, key=lambda m: pbt["fitness"][m] or -np.inf)
    assert 0 < s["pbt"]["step_s"] < s["wall_s"]
    lineage = s["pbt"]["lineage"]
    assert lineage[0]["from_update"] == 0 and lineage[-1]["until_update"] == 64
    assert lineage[-1]["member"] == s["pbt"]["best_member"]


@pytest.mark.slow
def test_the_closing_summary_speaks_of_members(population_run, tmp_path):
    """Members copy each other: the summary names the population, the best member with its
    fitness, hyperparameters and lineage, how many steps copied, and no interval across them."""
    from ppo_lab.judging.closing import closing_lines
    from ppo_lab.rundir import RunSummary

    s = read_summary(population_run)
    pbt = s["pbt"]
    assert pbt["copies"] == sum(c is not None for step in _steps(population_run) for c in step["copied"])
    lines = closing_lines(RunSummary.from_json(s), population_run, eval_mode="greedy", resume_command=None)
    text = "\n".join(lines)
    assert len(lines) <= 15 and "per member x 4 member(s)" in text and "across seeds" not in text and "seed(s)" not in text
    assert (f"population: 4 members, 15 exploit step(s), {pbt['steps_copied']} of them copied "
            f"({pbt['copies']} member copies)") in lines
    assert next(line for line in lines if line.startswith("best member")).startswith(
        f"best member {pbt['best_member']}: fitness ") and f"lr={pbt['best_hypers']['lr']:.3g}" in text
    lineage_line = next(line for line in lines if line.startswith("lineage: "))
    assert lineage_line.count("->") == len(pbt["lineage"]) - 1
    assert "(best member); members" in text


@pytest.mark.slow
def test_loggers_and_watch_tell_the_members_apart(population_run):
    """Each member is a seed's run in W&B and TensorBoard, tagged with its member number, with
    its explored values as the `pbt/lr` series; `ppo-lab watch` shows them too."""
    from ppo_lab.analysis.watch import snapshot
    from store_readers import read_offline_run, read_scalars

    best = read_summary(population_run)["pbt"]["best_member"]
    lr = {(int(r["member"]), int(r["update"])): float(r["pbt/lr"]) for r in read_rows(population_run)}
    for member in range(4):
        scalars = read_scalars(population_run / "tb" / f"seed_{member}")
        assert [(s, pytest.approx(v, rel=1e-6)) for s, v in scalars["pbt/lr"]] == [(u, lr[member, u]) for u in range(1, 65)]
        assert "charts/member" not in scalars  # an identity, not a series
    wandb_runs = [read_offline_run(p) for p in sorted((population_run / "wandb").glob("offline-run-*/run-*.wandb"))]
    assert sorted(r["config"]["member"] for r in wandb_runs) == [0, 1, 2, 3]
    for r in wandb_runs:
        assert [h["pbt/lr"] for h in r["history"]] == pytest.approx([lr[r["config"]["member"], u] for u in range(1, 65)])
        assert r["summary"]["pbt/best_member"] is (r["config"]["member"] == best)
    text = snapshot(population_run, width=200)
    assert "pbt/lr" in text and f"pbt: best member {best}" in text


@pytest.mark.slow
def test_plots_draw_the_population(population_run):
    from ppo_lab.analysis.run_plots import main
    assert main([str(population_run)]) == 0
    assert (population_run / "pbt.png").stat().st_size > 1000


def _as_sweep_job(run_dir: Path, job: Path, overrides: list[str]) -> None:
    """A copy of `run_dir` as a Hydra sweep job with these overrides (how aggregate groups runs)."""
    shutil.copytree(run_dir, job)
    (job / ".hydra").mkdir(exist_ok=True)
    (job / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))


@pytest.mark.slow
def test_random_search_copies_nothing_and_aggregates_against_pbt(population_run, tmp_path):
    run_dir = tmp_path / "random"
    train_run([*POPULATION, "pbt.exploit=false"], run_dir)  # the fixture's program: compiled once
    steps = _steps(run_dir)
    assert len(steps) == 15 and all(c is None for s in steps for c in s["copied"])
    assert all(s["hypers"] == steps[0]["hypers"] for s in steps)
    # Feasibility recorded on the same terms as PBT's, for comparing the two.
    assert all(len(s["feasible"]) == 4 and set(s["constraints"][0]) == {KL, "train/clip_frac"} for s in steps)
    assert {"feasible", "best_feasible", "constraints"} <= set(read_summary(run_dir)["pbt"])
    # `ppo-lab aggregate` over PBT and random search: populations.json, one population a side.
    _as_sweep_job(population_run, tmp_path / "sweep" / "0", ["pbt.population=4", "pbt.exploit=true"])
    _as_sweep_job(run_dir, tmp_path / "sweep" / "1", ["pbt.population=4", "pbt.exploit=false"])
    result = run_aggregate([tmp_path / "sweep"], quiet=True, plot=False, reps=100,
                           population_metrics=["criteria/final_return", KL])
    report = json.loads(result["paths"]["populations"].read_text())
    pbt, rs = report["groups"]["pbt.exploit=true"], report["groups"]["pbt.exploit=false"]
    for group, run in ((pbt, population_run), (rs, run_dir)):
        (pop,) = group["populations"]
        assert len(pop["members"]) == 4 and pop["worst"] <= pop["median"] <= pop["best"]
        assert group["median"]["point"] == pop["median"] and np.isnan(group["median"]["ci_low"])  # one: no interval
        assert "criteria/kl_ok_frac" in group["criteria_median_member"]
        # The member the run names best, and how many met the bounds at the end, from its summary.
        summary = read_summary(run)["pbt"]
        assert pop["selected"] == pop["members"][summary["best_member"]] and pop["feasible"] == sum(summary["feasible"])
        assert pop["also"][KL]["selected"] == read_summary(run)["final"][KL][summary["best_member"]]
        assert group["also"][KL]["median"]["point"] == pop["also"][KL]["median"]
    a, b = pbt["median"]["point"], rs["median"]["point"]
    p = report["improvement"]["pbt.exploit=true > pbt.exploit=false"]["median"]["point"]
    assert p == (1.0 if a > b else 0.5 if a == b else 0.0)  # Mann-Whitney of one population against one
    assert np.isnan(report["improvement"]["pbt.exploit=true > pbt.exploit=false"]["median"]["welch_p"])  # 1 a side
    assert report["warning"] and "1 population" in report["warning"]


@pytest.mark.slow
def test_sigkill_after_the_first_checkpoint_resumes_exactly(population_run, tmp_path):
    run_dir = tmp_path / "killed"
    proc = start_launch(POPULATION, run_dir)
    deadline = time.monotonic() + 120
    while not list((run_dir / "checkpoints").glob("ckpt_*.json")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.kill()
    proc.wait(timeout=30)
    assert read_summary(run_dir)["status"] == "running", "killed mid-run"
    killed_at = max(int(p.stem.split("_")[1]) for p in (run_dir / "checkpoints").glob("ckpt_*.json"))
    train_run(POPULATION, run_dir)
    s = read_summary(run_dir)
    assert s["status"] == "completed" and s["resumed_from"] is not None and s["resumed_from"] >= killed_at
    rows = read_rows(run_dir)
    assert max(Counter((r["update"], r["member"]) for r in rows).values()) == 1 and len(rows) == 64 * 4
    steps = _steps(run_dir)
    assert [st["update"] for st in steps] == list(range(4, 64, 4)), "no step twice, none missing"
    # Exactly: the same steps, the same values, as the uninterrupted run.
    assert steps == _steps(population_run)
    pick = lambda rs: [(r["update"], r["member"], r["pbt/lr"], r["train/mean_episode_return"]) for r in rs]  # noqa: E731
    assert sorted(pick(rows)) == sorted(pick(read_rows(population_run)))
