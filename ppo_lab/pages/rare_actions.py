"""The rare-action tuning spec as a sweep (`sweeps/rare_actions.yaml`: epoch floor x entropy
coefficient x learning rate, 4 seeds a cell): docs/results.md's table of its cells and the
tests its claims rest on, and docs/performance.md's grid trained as one program
(`hydra/launcher=vmap`) against one job a cell. Records: the sweep's runs under each launcher's
folder and each whole command's `/usr/bin/time -v` output beside them."""

from __future__ import annotations

import math
import re
from pathlib import Path

from ppo_lab import rundir
from ppo_lab.judging import tables as tb
from ppo_lab.judging.reproduction import compare_runs
from ppo_lab.pages import records as rec
from ppo_lab.pages.block import Block, measured_by

SWEEP = "docs/records/results/rare_sweep"
LAUNCHERS = ("basic", "vmap")
KEYS = ("auto_scale_epoch_floor", "ent_coef_initial", "lr")  # a cell: the swept ppo keys
COLUMNS = (("eval/episode_return", "eval return"), ("criteria/final_return", "final_return"),
           ("criteria/rare_use", "rare_use"), ("criteria/rare_reflex_frac", "rare_reflex_frac"),
           ("criteria/entropy_at_200", "entropy_at_200"))
OK_COLUMNS = ("criteria/kl_ok_frac", "criteria/clip_ok_frac")


def cells(root: Path, launcher: str = "basic") -> dict[tuple, list]:
    """(floor, entropy coefficient, lr) -> the cell's used units, in the sweep's order."""
    out: dict[tuple, list] = {}
    for unit in rec.units(root, f"{SWEEP}/{launcher}"):
        ppo = rundir.read_config(unit.run.path)["ppo"]
        out.setdefault(tuple(ppo[k] for k in KEYS), []).append(unit)
    return dict(sorted(out.items()))


def _values(units: list, metric: str) -> list[float]:
    return [u.values.get(metric, math.nan) for u in units]


def grid(root: Path) -> str:
    rows = []
    for (floor, ent, lr), units in cells(root).items():
        ok = " / ".join(tb.num(min(_values(units, m)), places=2) for m in OK_COLUMNS)
        rows.append([str(floor), f"{ent:g}", f"{lr:g}", *[tb.mean_ci(_values(units, m), m) for m, _ in COLUMNS], ok])
    return tb.table(["floor", "ent", "lr", *[h for _, h in COLUMNS], "kl_ok / clip_ok (lowest seed)"],
                    ["r", "r", "r", *["l"] * (len(COLUMNS) + 1)], rows)


def _pooled(found: dict, floor=None, ent=None, lr=None) -> list:
    """The units of every cell that matches the given keys (None: any)."""
    want = (floor, ent, lr)
    return [u for key, units in found.items() if all(w is None or k == w for k, w in zip(key, want)) for u in units]


def claims(root: Path) -> str:
    """The spec's claims as tests between pooled cells: Welch's t on the final return (and the
    rare actions' use), each side's mean and n."""
    found = cells(root)
    lr = max(k[2] for k in found)  # the experiment's own; the sweep's other is its half
    half = min(k[2] for k in found)
    tests = [
        ("epoch floor 2 vs 1, at the experiment's lr", "criteria/final_return", dict(floor=2, lr=lr), dict(floor=1, lr=lr)),
        ("epoch floor 2 vs 1, at the experiment's lr", "criteria/rare_use", dict(floor=2, lr=lr), dict(floor=1, lr=lr)),
        ("floor 2 at half the lr vs floor 1 at the lr", "criteria/final_return", dict(floor=2, lr=half), dict(floor=1, lr=lr)),
        ("floor 2 at half the lr vs floor 2 at the lr", "criteria/final_return", dict(floor=2, lr=half), dict(floor=2, lr=lr)),
        ("entropy coefficient 0.1 vs 0.15, floor 2", "criteria/final_return", dict(floor=2, ent=0.1), dict(floor=2, ent=0.15)),
        ("entropy coefficient 0.15 vs 0.2, floor 2", "criteria/final_return", dict(floor=2, ent=0.15), dict(floor=2, ent=0.2)),
        ("the spec's three changes vs the setting it diagnosed", "criteria/final_return",
         dict(floor=2, ent=0.15, lr=half), dict(floor=1, ent=0.1, lr=lr)),
        ("floor 2 alone vs the setting it diagnosed", "criteria/final_return",
         dict(floor=2, ent=0.1, lr=lr), dict(floor=1, ent=0.1, lr=lr)),
    ]
    rows = []
    for label, metric, a, b in tests:
        xa, xb = _values(_pooled(found, **a), metric), _values(_pooled(found, **b), metric)
        rows.append([label, f"`{metric}`", tb.mean_ci(xa, metric), tb.mean_ci(xb, metric), tb.welch(xa, xb)])
    return tb.table(["claim", "metric", "A: mean [95% CI]", "B: mean [95% CI]", "Welch's test"], ["l"] * 5, rows)


def _time(root: Path, launcher: str) -> tuple[float, float]:
    """(wall s, CPU s) of a launcher's whole command, from its `/usr/bin/time -v` record."""
    text = (root / SWEEP / f"{launcher}.time").read_text()
    clock = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", text).groups()
    wall = int(clock[0] or 0) * 3600 + int(clock[1]) * 60 + float(clock[2])
    cpu = sum(float(re.search(rf"{kind} time \(seconds\): ([\d.]+)", text).group(1)) for kind in ("User", "System"))
    return wall, cpu


def one_program(root: Path) -> str:
    """Each launcher's whole command; the vmap groups; every cell's first update against its
    one-job run; memory per replica."""
    basic, vmapped = cells(root, "basic"), cells(root, "vmap")
    groups = [u.run.summary.vmap_group for units in vmapped.values() for u in units[:1]]
    rows = []
    for launcher, programs in (("basic", len(basic)), ("vmap", sum(g["cell"] == 0 for g in groups))):
        wall, cpu = _time(root, launcher)
        rows.append([f"`hydra/launcher={launcher}`" if launcher == "vmap" else "the basic launcher", f"{wall:.0f}",
                     f"{cpu:.0f}", str(programs)])
    # The first update of each cell against its one-job run, as `ppo-lab reproduce` compares runs.
    found = [compare_runs(basic[key][0].run.path, vmapped[key][0].run.path, updates=1) for key in basic]
    largest = max((c.largest() or [0.0])[-1] for c in found)
    memory = [g["chunk_memory_mb_per_replica"] for g in groups]
    return (tb.table(["launcher", "wall s (whole command)", "CPU s", "programs compiled"], ["l", "r", "r", "r"], rows)
            + f"\n\nEvery cell's update 1 against its one-job run: the largest relative difference over the recorded "
              f"metrics {largest:.1e}. Compiled chunk memory per replica: {min(memory):.2f} to {max(memory):.2f} MB.")


RESULTS_BLOCKS = (
    Block("rare-actions-grid", "docs/results.md", (f"{SWEEP}/basic",), grid, measure=measured_by("rare_sweep")),
    Block("rare-actions-claims", "docs/results.md", (f"{SWEEP}/basic",), claims, measure=measured_by("rare_sweep")),
)
PERFORMANCE_BLOCKS = (
    Block("grid-one-program", "docs/performance.md", tuple(f"{SWEEP}/{x}" for x in (*LAUNCHERS, "basic.time", "vmap.time")),
          one_program, measure=measured_by("rare_sweep")),
)
