"""docs/results.md's blocks."""

from __future__ import annotations

from pathlib import Path

from ppo_lab import rundir
from ppo_lab.judging import tables as tb
from ppo_lab.judging.headline import RETURN, declared_bounds
from ppo_lab.judging.objective import seed_values
from ppo_lab.pages import records as rec
from ppo_lab.pages.block import Block, measured_by

PAGE = "docs/results.md"
PENDULUM_PARITY = "docs/continuous_parity_pendulum.json"
# The cases of the Pendulum parity record, as the table names them.
PARITY_SIDES = {
    "purejaxrl": "PureJaxRL",
    "lab_as_purejaxrl": "lab, truncation as PureJaxRL (a time-limit cut ends the episode)",
    "lab": "lab's default (the cut bootstrapped from the final observation)",
}
SCORE = "train/mean_episode_return"  # the parity score: mean return of the last 10% of updates' episodes


def pendulum_parity(root: Path) -> str:
    """Per side, the score's mean across seeds with its interval and each seed's; Welch's test
    of PureJaxRL against the lab when both end the episode at the cut (like for like)."""
    cases = {c["label"]: c for c in rundir.read_json(root / PENDULUM_PARITY)}
    rows = [[PARITY_SIDES[label], str(cases[label]["seeds"]), tb.mean_ci(cases[label]["score"], SCORE),
             tb.per_seed(cases[label]["score"])] for label in PARITY_SIDES]
    like = tb.welch(cases["purejaxrl"]["score"], cases["lab_as_purejaxrl"]["score"])
    default = tb.welch(cases["purejaxrl"]["score"], cases["lab"]["score"])
    return "\n".join([
        tb.table(["side", "seeds", "score: mean [95% CI]", "per seed"], ["l", "r", "l", "l"], rows), "",
        f"Welch's t-test against PureJaxRL: like for like {like}; the lab's default {default}."])


RESULTS = "docs/records/results"


def _returns(found, digits: int = 3) -> tuple[str, str]:
    """(each seed's evaluation return, their mean [95% CI])."""
    values = seed_values(found.summary, RETURN)
    return tb.per_seed(values, digits), tb.mean_ci(values, RETURN, declared_bounds(found.env))


def memory(root: Path) -> str:
    """MemoryChain with a GRU, an LSTM and no memory: each seed's greedy evaluation return;
    Welch's test of each memory against none."""
    rows, values = [], {}
    for name in ("gru", "lstm", "feed_forward"):
        found = rec.run(root, f"{RESULTS}/memory/{name}")
        net = rundir.read_config(found.path)["network"]
        label = f"{net['recurrent'].upper()} {net['recurrent_size']}" if net.get("recurrent") else "feed-forward (the same MLP)"
        rows.append([label, *_returns(found)])
        values[name] = seed_values(found.summary, RETURN)
    return "\n".join([
        tb.table(["network", "eval return per seed", "mean [95% CI]"], ["l", "l", "l"], rows), "",
        f"Welch's t-test against the feed-forward network: GRU {tb.welch(values['gru'], values['feed_forward'])}; "
        f"LSTM {tb.welch(values['lstm'], values['feed_forward'])}."])


def continuous(root: Path) -> str:
    rows = []
    for name in ("pendulum", "brax_inverted_pendulum"):
        found = rec.run(root, f"{RESULTS}/continuous/{name}")
        s = found.summary
        rows.append([f"`{rec.command(found)}`", *_returns(found), f"{s.wall_s:.0f} / {s.compile_s:.0f} / {s.eval_s:.0f}"])
    return tb.table(["command", "greedy return per seed", "mean [95% CI]", "training / compile / evaluation s"],
                    ["l", "l", "l", "l"], rows)


def outside_jax(root: Path) -> str:
    rows = []
    for name in ("cartpole_2_devices", "cartpole_1_device", "coinrun"):
        found = rec.run(root, f"{RESULTS}/envpool/{name}")
        s = found.summary
        rows.append([f"`{rec.command(found)}`", str(len(s.devices)), f"{s.updates} of {s.total_updates}",
                     tb.per_seed(seed_values(found.summary, RETURN), 4)])
    return tb.table(["command", "devices", "updates", "greedy evaluation return per seed"], ["l", "r", "l", "l"], rows)


def jumanji(root: Path) -> str:
    """Each run's training return over the first and the last tenth of its updates, and its evaluation."""
    rows = []
    for name in ("game2048", "maze", "knapsack"):
        record = f"{RESULTS}/jumanji/{name}"
        found, seeds = rec.run(root, record), rec.units(root, record)
        last = [u.values["criteria/final_return"] for u in seeds]
        first = [u.values["criteria/final_return"] - u.values["criteria/return_gain"] for u in seeds]
        rows.append([f"`{rec.command(found)}`", f"{found.summary.timesteps:,}", f"{tb.per_seed(first)} -> {tb.per_seed(last)}",
                     tb.per_seed(seed_values(found.summary, RETURN)), f"{found.summary.wall_s:.0f}"])
    return tb.table(["command", "steps per seed", "training return per seed, first -> last tenth",
                     "greedy eval return per seed", "training s"], ["l", "r", "l", "l", "r"], rows)


def cartpole(root: Path) -> str:
    rows = []
    for name, label in (("cold", "empty compilation cache"), ("warm", "the same, warm cache"),
                        ("envs_4", "`ppo.num_envs=4`"), ("envs_64", "`ppo.num_envs=64`")):
        found = rec.run(root, f"{RESULTS}/cartpole/{name}")
        s, ppo = found.summary, rundir.read_config(found.path)["ppo"]
        rows.append([label, f"{ppo['num_envs']} x {ppo['num_steps']}",
                     tb.per_seed(seed_values(found.summary, RETURN), 4), f"{s.compile_s:.1f}", f"{s.wall_s:.1f}", f"{s.sps:,.0f}"])
    return tb.table(["`experiment=cartpole num_seeds=4`", "envs x steps", "greedy return per seed", "compile s",
                     "training s", "training steps/s (4 seeds)"], ["l", "l", "l", "r", "r", "r"], rows)


BLOCKS = (
    Block("memory-chain", PAGE, (f"{RESULTS}/memory",), memory, measure=measured_by("memory")),
    Block("continuous-control", PAGE, (f"{RESULTS}/continuous",), continuous, measure=measured_by("continuous")),
    Block("pendulum-parity", PAGE, (PENDULUM_PARITY,), pendulum_parity),
    Block("envpool-learning", PAGE, (f"{RESULTS}/envpool",), outside_jax, measure=measured_by("envpool")),
    Block("jumanji", PAGE, (f"{RESULTS}/jumanji",), jumanji, measure=measured_by("jumanji")),
    Block("cartpole", PAGE, (f"{RESULTS}/cartpole",), cartpole, measure=measured_by("cartpole")),
)
