"""docs/pbt.md's blocks: populations against random search, from the records of their runs
(`ppo-lab record`, one folder per arm under docs/records/pbt/). The unit is the population
(its members copy one another): `analysis/populations.py` gives each arm's statistics over its
populations and the tests between arms, as `ppo-lab aggregate` writes them to populations.json."""

from __future__ import annotations

import statistics
from pathlib import Path

from ppo_lab.analysis import populations as pop
from ppo_lab.analysis.sweep import collect_groups
from ppo_lab.judging import tables as tb
from ppo_lab.pages.block import Block, measured_by

PAGE = "docs/pbt.md"
CARTPOLE = "docs/records/pbt/cartpole"
BOUNDS = "docs/records/pbt/bounds"
# Each arm's folder of records, and its name in the tables.
CARTPOLE_ARMS = {"pbt": "PBT", "random_search": "random search"}
BOUNDS_ARMS = {"random_search": "random search", "pbt_on_return": "PBT on return", "pbt_under_bounds": "PBT under bounds"}
ENTROPY = "train/entropy"
# The median member's statistics of the bounds table: (metric, its name in the table).
MEDIAN_ROWS = (
    (pop.DEFAULT_METRIC, f"`{pop.DEFAULT_METRIC}`"),
    (ENTROPY, f"final `{ENTROPY}`"),
    ("criteria/entropy_above_1_frac", "`criteria/entropy_above_1_frac`"),
    ("criteria/kl_ok_frac", "`criteria/kl_ok_frac`"),
    ("criteria/clip_ok_frac", "`criteria/clip_ok_frac`"),
    ("criteria/rare_reflex_frac", "`criteria/rare_reflex_frac`"),
)


def report(root: Path, folder: str, arms: dict[str, str]) -> dict:
    col = collect_groups({label: [root / folder / name] for name, label in arms.items()})
    return pop.population_report(col, also=(ENTROPY,))


def _ci(e: dict) -> str:
    return tb.interval(e["point"], e["ci_low"], e["ci_high"])


def _versus(rep: dict, a: str, b: str, stat: str) -> list[str]:
    """P(a > b) with its interval (none below 8 populations a side) and Welch's p, with n."""
    test = rep["improvement"].get(f"{a} > {b}")
    flip = test is None
    test = test or rep["improvement"][f"{b} > {a}"]
    p = test[stat]
    if flip:
        p = {**p, "point": 1 - p["point"], "ci_low": 1 - p["ci_high"], "ci_high": 1 - p["ci_low"]}
    n = f"{len(rep['groups'][a]['populations'])} + {len(rep['groups'][b]['populations'])}"
    return [tb.probability(p), f"{tb.pvalue(p['welch_p'])} ({n})"]


def against_random_search(root: Path) -> str:
    """Per game the median, best and worst member of each population, mean over populations,
    PBT against random search."""
    rows = []
    for game, folder, pbt_arm in (("CartPole", CARTPOLE, "PBT"), ("rare actions", BOUNDS, "PBT on return")):
        arms = CARTPOLE_ARMS if folder == CARTPOLE else {k: v for k, v in BOUNDS_ARMS.items() if v != "PBT under bounds"}
        rep = report(root, folder, arms)
        g = rep["groups"]
        for stat in pop.STATISTICS:
            rows.append([game, stat, _ci(g[pbt_arm][stat]), _ci(g["random search"][stat]),
                         *_versus(rep, pbt_arm, "random search", stat)])
    return tb.table(["game", "member", "PBT", "random search", "P(PBT > RS)", "Welch p (populations)"],
                    ["l", "l", "l", "l", "l", "l"], rows)


def under_bounds(root: Path) -> str:
    """The bounds table: each arm's median member, mean over populations; members within every
    bound; then the tests the page's claims rest on."""
    rep = report(root, BOUNDS, BOUNDS_ARMS)
    g = rep["groups"]
    arms = list(BOUNDS_ARMS.values())
    rows = []
    for metric, name in MEDIAN_ROWS:
        cells = [_ci(g[a]["median"]) if metric == pop.DEFAULT_METRIC else
                 _ci(g[a]["also"][metric]["median"]) if metric == ENTROPY else
                 _ci(g[a]["criteria_median_member"][metric]) for a in arms]
        rows.append([name, *cells])
    within = [", ".join(str(r["feasible"]) for r in g[a]["populations"]) if g[a]["feasible"] else "not bounded" for a in arms]
    rows.append([f"members within bounds (of {len(g[arms[0]]['populations'][0]['members'])}), per population", *within])
    main = tb.table(["median member", *arms], ["l", *["l"] * len(arms)], rows)
    tests = [[f"{a} > {b}", stat, *_versus(rep, a, b, stat)]
             for a, b in (("PBT under bounds", "random search"), ("PBT on return", "PBT under bounds"))
             for stat in ("median", pop.SELECTED)]
    return main + "\n\n" + tb.table(["`criteria/final_return`", "member", "P(A > B)", "Welch p (populations)"],
                                    ["l", "l", "l", "l"], tests)


def cost(root: Path) -> str:
    """Each CartPole population's run: wall time, host seconds in steps, training steps/s;
    PBT's wall time over random search's, population by population (the same seeds)."""
    col = collect_groups({label: [root / CARTPOLE / name] for name, label in CARTPOLE_ARMS.items()})
    runs = {label: sorted({id(u.run): u.run for u in col.units if u.group == label}.values(), key=lambda r: min(r.seeds))
            for label in CARTPOLE_ARMS.values()}
    rows = [[label, tb.per_seed([r.summary.wall_s for r in rs], 3),
             f"{min(r.summary.pbt['step_s'] for r in rs):.2f} to {max(r.summary.pbt['step_s'] for r in rs):.2f}",
             f"{min(r.summary.sps for r in rs) / 1e3:.0f}k to {max(r.summary.sps for r in rs) / 1e3:.0f}k"]
            for label, rs in runs.items()]
    ratios = [a.summary.wall_s / b.summary.wall_s for a, b in zip(runs["PBT"], runs["random search"])]
    return (tb.table(["", "training s (each population)", "`pbt.step_s`", "training steps/s"], ["l", "l", "l", "l"], rows)
            + f"\n\nPBT's training time over random search's, population by population: median "
              f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}x to {max(ratios):.2f}x, {len(ratios)} pairs).")


BLOCKS = (
    Block("pbt-against-random-search", PAGE, (CARTPOLE, BOUNDS), against_random_search,
          measure=measured_by("pbt_cartpole pbt_bounds")),
    Block("pbt-under-bounds", PAGE, (BOUNDS,), under_bounds, measure=measured_by("pbt_bounds")),
    Block("pbt-cost", PAGE, (CARTPOLE,), cost, measure=measured_by("pbt_cartpole")),
)
