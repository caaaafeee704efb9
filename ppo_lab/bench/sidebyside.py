"""The lab and PureJaxRL side by side on PureJaxRL's CartPole settings, in one process.

    python -m ppo_lab.bench.sidebyside --purejaxrl PATH [--rounds 3] [--out f.json]
        [--record docs/benchmark_cpu.json] [hydra overrides]

(`ppo-lab benchmark --purejaxrl PATH` runs this in a fresh process as one of its sections.)

Cases, both sides at PureJaxRL's published CartPole settings (`purejaxrl_settings.CARTPOLE`,
in the lab's keys by `purejaxrl_settings.lab_overrides`) at these sizes:
- one seed at 4 envs and at 64 envs;
- 4 seeds at 64 envs: PureJaxRL's jit-of-vmap against the lab's default layout.
The lab runs as a user runs it: `run.entry.train` (what launch.py calls) with `benchmark=true`, the lab's defaults
(`hardware` as composed, truncation bootstrapping on, its layout choice); its `sps` is env steps
over the training loop's wall time, compile excluded. PureJaxRL's whole training is one jitted
call, timed after compiling it (its first call, like the lab's chunks). The cases are interleaved and repeated (`--rounds`): a ratio
is each side's best round over the other's (best of `--rounds`: the round least disturbed by
other work on a shared machine), with every round's figures and their per-round ratios kept.

It prints the three ratios with the CPU's model; `--record FILE` keeps the result in FILE
(`docs/benchmark_cpu.json`) under this CPU's id (`host_cpu.cpu_id`), one entry per CPU type,
replacing only that CPU's `sidebyside` (`ppo-lab docs` renders docs/performance.md's table from it).

jax is imported at the top (importing it does not start XLA's backend); `main` applies the
`hardware` settings with `ppo_lab.hardware.start_jax` before PureJaxRL's code (which imports
gymnax, and so starts the backend) is loaded.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import statistics
import sys
import tempfile
from pathlib import Path

import jax

from ppo_lab import rundir
from ppo_lab.bench import markdown, purejaxrl_peer, purejaxrl_settings
from ppo_lab.bench.configs import compose
from ppo_lab.hardware import start_jax
from ppo_lab.host_cpu import cpu_id, cpu_record
from ppo_lab.run.entry import train

# (label, num_envs, seeds, timesteps per seed) at each size; the bar: lab / PureJaxRL at least.
CASES = {
    "full": [("seed1_envs4", 4, 1, 250_000), ("seed1_envs64", 64, 1, 1_000_000), ("seeds4_envs64", 64, 4, 500_000)],
    "quick": [("seed1_envs4", 4, 1, 4 * 128 * 8), ("seeds4_envs64", 64, 4, 64 * 128 * 2)],
}
BAR = {"seed1_envs4": 0.95, "seed1_envs64": 0.95, "seeds4_envs64": 1.5}


def lab_overrides(num_envs: int, num_seeds: int, timesteps: int) -> list[str]:
    """PureJaxRL's CartPole settings in the lab's keys; everything else the lab's defaults."""
    peer = {**purejaxrl_settings.CARTPOLE, "NUM_ENVS": num_envs, "TOTAL_TIMESTEPS": timesteps}
    return [*purejaxrl_settings.lab_overrides(peer), f"num_seeds={num_seeds}", "benchmark=true"]


def lab_run(overrides: list[str], workdir: Path) -> rundir.RunSummary:
    """One lab run as `launch.py` makes it (`run.entry.train`), in this process's JAX, into a new folder of `workdir`."""
    return train(compose(overrides), Path(tempfile.mkdtemp(dir=workdir)))


def measure(checkout, extra: list[str], rounds: int, quick: bool) -> dict:
    """Interleaved rounds of every case; PeerUnavailable when PureJaxRL cannot be imported."""
    module = purejaxrl_peer.load(checkout)
    cases = CASES["quick" if quick else "full"]
    peers = {label: purejaxrl_peer.PeerTraining(module, envs, seeds, steps) for label, envs, seeds, steps in cases}
    samples: dict = {label: {"purejaxrl": [], "lab": [], "ratio": []} for label, *_ in cases}
    layouts = {}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="ppo_lab_sidebyside_") as workdir:
        for round_ in range(rounds):
            for label, envs, seeds, steps in cases:
                peer = peers[label].steps / peers[label].first_call_s()
                summary = lab_run(lab_overrides(envs, seeds, steps) + extra, Path(workdir))
                lab, layouts[label] = summary.sps, summary.layout
                s = samples[label]
                s["purejaxrl"].append(peer), s["lab"].append(lab), s["ratio"].append(lab / peer)
                print(f"[sidebyside] round {round_ + 1}/{rounds} {label}: lab {lab:,.0f} / PureJaxRL {peer:,.0f} "
                      f"steps/s = {lab / peer:.2f}x", file=sys.stderr)
    out = {"checkout": str(purejaxrl_peer.find_checkout(checkout)), "rounds": rounds, "cpu": cpu_record(),
           "date": datetime.date.today().isoformat(), "jax": jax.__version__,
           "distrax": purejaxrl_peer.distrax_source(), "overrides": list(extra),
           "load_avg_before": load_before, "load_avg_after": os.getloadavg(), "cases": {}}
    for label, envs, seeds, steps in cases:
        s = samples[label]
        lab, peer = max(s["lab"]), max(s["purejaxrl"])
        out["cases"][label] = {
            "num_envs": envs, "num_seeds": seeds, "timesteps_per_seed": steps, "lab_layout": layouts[label],
            "lab_sps": lab, "purejaxrl_sps": peer, "ratio": lab / peer, "median_ratio": statistics.median(s["ratio"]),
            "bar": BAR[label], "pass": lab / peer >= BAR[label], "samples": s,
            "purejaxrl_compile_s": peers[label].compile_s,
        }
    return out


def keep_record(path: Path, section: str, result: dict) -> None:
    """`result` as `section` of this CPU's entry in the per-CPU record at `path` (other CPUs'
    entries and this CPU's other sections kept as they are)."""
    record = rundir.read_json(path, {"cpus": {}})
    entry = record["cpus"].setdefault(cpu_id(result["cpu"]), {})
    entry["cpu"] = result["cpu"]
    entry[section] = result
    rundir.write_json_atomic(path, record)


def format_table(result: dict) -> str:
    if "skipped" in result:
        return f"PureJaxRL side by side: skipped ({result['skipped']})"
    layouts = ", ".join(f"{label} {c['lab_layout']['mode']} x{c['lab_layout']['num_devices']}"
                        for label, c in result["cases"].items())
    return (f"PureJaxRL side by side on {result['cpu'].get('model_name') or cpu_id(result['cpu'])} "
            f"({result['rounds']} interleaved rounds, best of each side; load average "
            f"{result['load_avg_before'][0]:.1f} -> {result['load_avg_after'][0]:.1f}; the lab's layouts: {layouts})\n"
            + markdown.sidebyside_table(result))


def peer_parser(doc: str, overrides_help: str) -> argparse.ArgumentParser:
    """The command line this side by side and `update_parts` share."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("overrides", nargs="*", help=overrides_help)
    parser.add_argument("--purejaxrl", default=None, help=f"PureJaxRL checkout (default: ${purejaxrl_peer.ENV_VAR})")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--record", type=Path, default=None,
                        help="keep the result under this CPU's id in a per-CPU record (docs/benchmark_cpu.json)")
    return parser


def report(args, result: dict, table: str, section: str) -> None:
    """The table printed, the result written to `--out` and kept as `section` of this CPU's entry in `--record`."""
    print(table)
    if args.out:
        rundir.write_json_atomic(args.out, result)
    if args.record and "skipped" not in result:
        keep_record(args.record, section, result)


def main(argv=None) -> int:
    parser = peer_parser(__doc__, "extra Hydra overrides for the lab's runs")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (tests)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    try:
        purejaxrl_peer.find_checkout(args.purejaxrl)  # PeerUnavailable before any JAX start where none is given
        start_jax(compose(list(args.overrides))["hardware"])  # before PureJaxRL imports jax
        result = measure(args.purejaxrl, list(args.overrides), args.rounds, args.quick)
    except purejaxrl_peer.PeerUnavailable as exc:
        result = {"skipped": str(exc)}
    report(args, result, format_table(result), "sidebyside")
    return 0


if __name__ == "__main__":
    sys.exit(main())
