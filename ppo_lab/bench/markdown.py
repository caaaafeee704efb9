"""Markdown tables from a benchmark JSON, so the figures a page shows are rendered from the data
they were measured into (`ppo-lab benchmark --markdown FILE.json`; tests/test_docs.py checks that
docs/performance.md holds exactly what this renders from each `docs/benchmark_*.json`).

Four kinds of file, told apart by their keys:
- a suite run (`ppo-lab benchmark --out`): `machine` and `envs`;
- the PureJaxRL side by side (`python -m ppo_lab.bench.sidebyside --out`): `cases`, in the
  per-CPU record's table;
- accelerator figures with a `device` per row (docs/benchmark_gpu.json): `rows`, and optionally
  `runs` (launches as users run them), `update_parts` and `sidebyside`;
- the per-CPU record (docs/benchmark_cpu.json): `cpus`, each CPU's side by side (`sidebyside`)
  and where a 4-env update's time goes (`update_parts`, and `update_parts_before` where a
  change was measured against the code before it; `ppo_lab.bench.update_parts`).
Tables are separated by one blank line. No jax here: the command renders without a backend.
"""

from __future__ import annotations

import json
from pathlib import Path

from ppo_lab.judging.tables import formatted, table


def whole(x) -> str:
    """Steps/s or microseconds to the unit, with thousands separators."""
    return formatted(x, ",.0f")


def suite_tables(d: dict) -> list[str]:
    """The fresh-process checks (a run with them: not `--no-processes`) and the per-env
    throughput of one suite run; the terminal report of `ppo-lab benchmark` prints them too."""
    envs = table(
        ["env", "envs x steps", "env alone steps/s", "rollout steps/s", "training steps/s", "time share env / policy / update"],
        ["l", "l", "r", "r", "r", "r"],
        [[name, f"{r['num_envs']} x {r['num_steps']}", whole(r["env_sps"]), whole(r["rollout_sps"]), whole(r["train_sps"]),
          " / ".join(f"{r['time_share'][k]:.1%}" for k in ("env", "policy", "update"))] for name, r in d["envs"].items()])
    if "seed_process_wall_s" not in d:
        return [envs]
    checks = table(
        ["check", "measured"], ["l", "l"],
        [["16 seeds vmapped in one process vs 16 one-seed processes",
          f"{formatted(d['seed_process_wall_s'], '.1f')} s x 16 vs {formatted(d['seeds16_vmapped_wall_s'], '.1f')} s: "
          f"{formatted(d['seeds16_speedup'], '.2f')}x ({formatted(d['seeds16_speedup_vs_warm_cache_processes'], '.2f')}x "
          f"against 1 cold + 15 warm-cache processes of {formatted(d['seed_process_wall_s_warm_cache'], '.1f')} s)"],
         ["2 host devices (seeds split) vs 1 device, training steps/s", f"{formatted(d['devices2_speedup'], '.2f')}x"],
         ["compile, persistent cache cold vs warm (two fresh processes)",
          f"{formatted(d['compile_s_cold'], '.2f')} s vs {formatted(d['compile_s_warm'], '.2f')} s: {formatted(d['compile_cache_speedup'], '.2f')}x"],
         ["the lab at PureJaxRL's CartPole defaults (4 envs x 128 steps), training steps/s",
          whole((d.get("purejaxrl_cartpole") or {}).get("train_sps"))]])
    return [checks, envs]


def accelerator_table(rows: list[dict]) -> str:
    """The accelerator section's rows, one device per row; 'x one seed' against the same device and precision."""
    one = {(r["device"], r["precision"]): r["sps"] for r in rows if r["seeds"] == 1}
    out = []
    for r in rows:
        base = one.get((r["device"], r["precision"]))
        out.append([r["device"], r["date"], str(r["seeds"]), r["precision"], whole(r["sps"]),
                    "" if base is None else f"{r['sps'] / base:.2f}", formatted(r.get("memory_gb"), ".1f") + " GB",
                    formatted(r.get("compile_s"), ".1f"), formatted(100 * r["matrix_fraction"], ".1f") + "%"])
    return table(["device", "date", "seeds", "precision", "steps/s (all seeds)", "x one seed", "memory (XLA)",
                   "compile s", "of the bf16 matmul rate"], ["l", "l", "r", "l", "r", "r", "r", "r", "r"], out)


def runs_table(runs: list[dict]) -> str:
    """Launches as users run them (`benchmark=true`): steps/s over the training loop's wall time."""
    return table(["device", "date", "run", "seeds", "minibatches", "steps/s (all seeds)", "compile s", "memory per device"],
                  ["l", "l", "l", "r", "r", "r", "r", "r"],
                  [[r["device"], r["date"], r["run"], str(r["seeds"]), str(r["num_minibatches"]), whole(r["sps"]),
                    formatted(r.get("compile_s"), ".1f"), "-" if r.get("memory_gb") is None else f"{r['memory_gb']:.1f} GB"]
                   for r in runs])


def parts_table(parts: dict) -> str:
    """Where an update's time goes, in ms, per seed count."""
    seeds = parts["seeds"]
    return table(["part (ms)", *[f"{s} seed{'s' if s > 1 else ''}" for s in seeds]], ["l", *["r"] * len(seeds)],
                  [[p["part"], *[formatted(v, ".1f") for v in p["ms"]]] for p in parts["parts"]])


def sidebyside_table(side: dict) -> str:
    """The side by side on one CPU: each side's best round, their ratio against the bar, and
    every round's figures (lab / PureJaxRL, thousands of steps/s)."""
    rows = []
    for c in side["cases"].values():
        s = c["samples"]
        rounds = ", ".join(f"{lab / 1e3:.0f}k / {peer / 1e3:.0f}k" for lab, peer in zip(s["lab"], s["purejaxrl"]))
        rows.append([f"{c['num_seeds']} seed{'s' if c['num_seeds'] > 1 else ''} x {c['num_envs']} envs",
                     f"{whole(c['lab_sps'])} / {whole(c['purejaxrl_sps'])}",
                     f"**{c['ratio']:.2f}x** ({'meets' if c['pass'] else 'below'} {c['bar']}x)", rounds])
    return table(["case", "lab / PureJaxRL steps/s (best round)", "ratio", "each round: lab / PureJaxRL"],
                 ["l", "r", "l", "l"], rows)


PART_NAMES = {"rollout": "rollout (policy, sampling, env: the scan of its steps)", "gae": "GAE (its reverse scan)",
              "epochs": "the epochs' minibatch steps (the scan of epochs)", "metrics": "the lab's metrics row",
              "guard": "the divergence guard", "rest": "the rest of the update (last value pass, schedules, outputs)",
              "host": "the host and first calls (a run's wall time less its warm program's)"}


def update_parts_table(entry: dict) -> str:
    """Where a 4-env update's time goes, the lab (before a change, where measured) beside
    PureJaxRL, microseconds per update and each part's share of the gap."""
    after, before = entry["update_parts"], entry.get("update_parts_before")
    header = ["part (us per update)", *(["lab before"] if before else []), "lab", "PureJaxRL", "share of the gap"]
    rows = []
    for name, p in after["parts"].items():
        share = "" if p["share_of_gap"] is None else f"{100 * p['share_of_gap']:.0f}%"
        rows.append([PART_NAMES[name], *([whole(before["parts"][name]["lab_us"])] if before else []),
                     whole(p["lab_us"]), whole(p["purejaxrl_us"]), share])
    rows.append(["**one update**", *([whole(before["lab_us"])] if before else []), whole(after["lab_us"]),
                 whole(after["purejaxrl_us"]), f"gap {whole(after['gap_us'])} us"])
    return table(header, ["l", *(["r"] if before else []), "r", "r", "r"], rows)


def cpu_record_tables(data: dict) -> list[str]:
    """Per CPU of the record, in its order: the side by side, then where an update's time goes."""
    tables = []
    for entry in data["cpus"].values():
        first = entry.get("sidebyside") or entry.get("update_parts")
        cpu = entry["cpu"]
        tables.append(f"**{cpu.get('model_name') or cpu.get('vendor')}** (family {cpu.get('family')} model "
                      f"{cpu.get('model')}), {first['date']}, jax {first['jax']}:")
        if entry.get("sidebyside"):
            tables.append(sidebyside_table(entry["sidebyside"]))
        if entry.get("update_parts"):
            tables.append(update_parts_table(entry))
    return tables


def gpu_sidebyside_table(rows: list[dict]) -> str:
    """CartPole beside PureJaxRL at accelerator sizes."""
    return table(["device", "case", "lab steps/s", "PureJaxRL steps/s", "ratio"], ["l", "l", "r", "r", "r"],
                  [[r["device"], r["case"], f"{r['lab_sps'] / 1e6:.2f}M", f"{r['purejaxrl_sps'] / 1e6:.2f}M",
                    f"{r['lab_sps'] / r['purejaxrl_sps']:.2f}x"] for r in rows])


def render(data: dict) -> str:
    """Every table the file holds, as markdown, separated by blank lines."""
    if not isinstance(data, dict):
        raise ValueError(f"not a benchmark JSON this command renders: expected an object, got a {type(data).__name__}")
    if "cpus" in data:
        tables = cpu_record_tables(data)
    elif "envs" in data and "machine" in data:
        tables = suite_tables(data)
    elif "cases" in data:
        tables = [sidebyside_table(data)]
    elif "rows" in data and all("device" in r for r in data["rows"]):
        tables = [accelerator_table(data["rows"])]
        tables += [runs_table(data["runs"])] if data.get("runs") else []
        tables += [parts_table(data["update_parts"])] if data.get("update_parts") else []
        tables += [gpu_sidebyside_table(data["sidebyside"])] if data.get("sidebyside") else []
    else:
        raise ValueError("not a benchmark JSON this command renders: expected a suite run (`machine`, `envs`), "
                         f"a side by side (`cases`), a per-CPU record (`cpus`) or rows with a `device` each (`rows`); got keys {sorted(data)}")
    return "\n\n".join(tables) + "\n"


def render_file(path: Path) -> str:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"--markdown {path}: cannot read a JSON file there ({e})") from e
    return render(data)
