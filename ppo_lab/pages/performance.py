"""docs/performance.md's blocks: the benchmark JSONs beside the page, as `ppo-lab benchmark
--markdown FILE.json` renders each (`bench/markdown.py`)."""

from __future__ import annotations

import statistics
from pathlib import Path

from ppo_lab import rundir
from ppo_lab.bench import markdown
from ppo_lab.judging import tables as tb
from ppo_lab.pages import records as rec
from ppo_lab.pages.block import Block, measured_by

PAGE = "docs/performance.md"


# The suite's row of the lab at PureJaxRL's CartPole settings: the side by side gives that figure
# beside PureJaxRL's, measured together, so the page quotes it once.
PUREJAXRL_ROW = "| the lab at PureJaxRL's CartPole defaults"


def suite(root: Path) -> str:
    return "\n".join(line for line in markdown.render_file(root / SUITE_CPU).splitlines()
                     if not line.startswith(PUREJAXRL_ROW))


SUITE = "docs/records/performance/suite"
SUITE_CPU = "docs/benchmark_cpu_2core.json"
CPU_RECORD = "docs/benchmark_cpu.json"  # per CPU type: the side by side with PureJaxRL, where an update's time goes
GPU_RECORD = "docs/benchmark_gpu.json"
LAYOUT = "docs/records/performance/layout"
ROUNDS = 3
MULTIHOST = "docs/records/performance/multihost"


def _rounds(root: Path, name: str) -> list[dict]:
    """The suite's JSON of each round (`ppo-lab benchmark --no-processes`, interleaved)."""
    return [rundir.read_json(root / SUITE / f"{name}_round{r}.json") for r in range(1, ROUNDS + 1)]


def _spread(values: list[float], spec: str = ",.0f") -> str:
    """The median of the rounds, and their range: `61,440 (58,113-62,002)`."""
    return f"{format(statistics.median(values), spec)} ({format(min(values), spec)}-{format(max(values), spec)})"


def _ratio(values: list[float]) -> str:
    """The median of per-round ratios, and their range: `1.06x (0.76-1.18)`."""
    return f"{statistics.median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"


def _thousands(values: list[float]) -> str:
    return ", ".join(f"{v / 1e3:.0f}k" for v in values)


def gru_cost(root: Path) -> str:
    """Per env, the feed-forward network against the same with a GRU cell, in one process a round."""
    rounds = _rounds(root, "gru")
    rows = []
    for env, first in rounds[0]["recurrent"].items():
        size = rounds[0]["envs"][env]
        r = [x["recurrent"][env] for x in rounds]
        rows.append([env, f"{size['num_envs']} x {size['num_steps']}, {size['num_minibatches']}",
                     f"{_spread([x['mlp_rollout_sps'] for x in r])} / {_spread([x['gru_rollout_sps'] for x in r])}",
                     f"{_spread([x['mlp_train_sps'] for x in r])} / {_spread([x['gru_train_sps'] for x in r])}",
                     _ratio([x["gru_over_mlp_train"] for x in r])])
    return tb.table(["env", "envs x steps, minibatches", "rollout steps/s MLP / GRU", "training steps/s MLP / GRU",
                     "GRU / MLP training"], ["l", "l", "r", "r", "r"], rows)


def outside_jax(root: Path) -> str:
    """CartPole-v1 through each family, every figure the median of the rounds (their range)."""
    rounds = _rounds(root, "outside_jax")
    rows = []
    for env in rounds[0]["envs"]:
        r = [x["envs"][env] for x in rounds]
        rows.append([f"`{env}`", _spread([x["env_sps"] for x in r]), _spread([1e6 / x["env_sps"] for x in r], spec=".1f"),
                     _spread([x["rollout_sps"] for x in r]), _spread([x["train_sps"] for x in r])])
    return tb.table(["CartPole-v1 through", "env alone steps/s", "us per env step", "rollout steps/s", "training steps/s"],
                    ["l", "r", "r", "r", "r"], rows)


def layout_split(root: Path) -> str:
    """One seed's envs on one device against split over two, at 4 and at 64 envs."""
    rows = []
    for envs in (4, 64):
        sps = {lay: [rec.benchmark(root, f"{LAYOUT}/envs{envs}_{lay}_r{r}")["sps"] for r in range(1, ROUNDS + 1)]
               for lay in ("single", "envs")}
        rows += [[str(envs), label, _thousands(sps[lay]),
                  _ratio([a / b for a, b in zip(sps[lay], sps["single"])]) if lay != "single" else "-"]
                 for lay, label in (("single", "one device"), ("envs", "split over 2 devices"))]
    return tb.table(["envs", "layout", "training steps/s each round", "over one device (median, range)"],
                    ["r", "l", "l", "r"], rows)


def multihost(root: Path) -> str:
    """One process of 2 host devices against 2 processes of 1 device each, with the host's CPUs
    split between them and not; training steps/s of each round, interleaved."""
    setups = {"one_process": "1 process x 2 devices", "two_processes_split_true": "2 processes x 1 device, CPUs split",
              "two_processes_split_false": "2 processes x 1 device, CPUs shared"}
    sps = {name: [rec.benchmark(root, f"{MULTIHOST}/{name}_r{r}")["sps"] for r in range(1, ROUNDS + 1)] for name in setups}
    rows = [[label, _thousands(sps[name]), f"{statistics.median(sps[name]):,.0f}",
             _ratio([a / b for a, b in zip(sps[name], sps["one_process"])]) if name != "one_process" else "-"]
            for name, label in setups.items()]
    return tb.table(["`experiment=cartpole num_seeds=4`", "steps/s each round", "median", "over one process (median, range)"],
                    ["l", "l", "r", "r"], rows)


BLOCKS = (
    Block("suite-cpu", PAGE, (SUITE_CPU,), suite),
    Block("sidebyside-cpu", PAGE, (CPU_RECORD,), lambda root: markdown.render_file(root / CPU_RECORD), measure=(
        f"`python -m ppo_lab.bench.sidebyside --purejaxrl PATH --rounds 3 --record {CPU_RECORD}` and `python -m "
        f"ppo_lab.bench.update_parts --purejaxrl PATH --rounds 3 --record {CPU_RECORD}` measure them (one entry per CPU "
        f"type) and keep the record.")),
    Block("gpu", PAGE, (GPU_RECORD,), lambda root: markdown.render_file(root / GPU_RECORD)),
    Block("layout-split", PAGE, (LAYOUT,), layout_split, measure=measured_by("layout")),
    Block("gru-cost", PAGE, (SUITE,), gru_cost, measure=measured_by("suite")),
    Block("outside-jax-speed", PAGE, (SUITE,), outside_jax, measure=measured_by("suite")),
    Block("multihost-speed", "docs/multihost.md", (MULTIHOST,), multihost, measure=measured_by("multihost")),
)
