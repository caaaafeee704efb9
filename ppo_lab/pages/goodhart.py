"""docs/goodhart.md's blocks, from the records of their runs under docs/records/goodhart/: the
true objective along training against the distance from the initial policy, per mode (the
overoptimisation report, `experiments/goodhart/overoptimisation.py`, its tables and figure);
selection on the proxy one level up (populations, `analysis/populations.py`), and the fidelity
cells (`experiments/goodhart/fidelity.py`: the lab's recipe with float32 or uint8 rollout
storage, the reference's recipe whole and with float32 storage)."""

from __future__ import annotations

import math
from pathlib import Path

from ppo_lab import estimators as es
from ppo_lab.analysis import populations as pop
from ppo_lab.analysis.sweep import collect, collect_groups
from ppo_lab.experiments.goodhart import fidelity
from ppo_lab.experiments.goodhart import overoptimisation as ov
from ppo_lab.experiments.goodhart import report
from ppo_lab.judging import tables as tb
from ppo_lab.pages.block import Block, Figure, measured_by

PAGE = "docs/goodhart.md"
OVEROPTIMISATION = "docs/records/goodhart/overoptimisation"
OVEROPTIMISATION_FIGURE = "docs/goodhart-overoptimisation.png"
ONE_LEVEL_UP = "docs/records/goodhart/one_level_up"
FIDELITY = "docs/records/goodhart/fidelity"
ARMS = {"proxy_rs": "random search", "proxy_pay": "PBT on pay", "proxy_true": "PBT on the truth"}
TRUE = "true/objective_per_1k"
ENERGY, POISON = "eval/energy_per_1k", "eval/poison_per_1k"
# The fidelity tables' columns: (metric, heading).
COLUMNS = (("poison_per_1k", "poison/1k"), ("energy_per_1k", "energy/1k"), ("food_share", "food share"),
           ("efficiency_per_life", "efficiency per life"), ("food_per_1k", "food/1k"), ("deaths_per_1k", "deaths/1k"),
           ("survival_mean", "survival"))
RECIPES = {"lab": ("lab", "lab_uint8"), "reference": ("reference", "reference_float32")}
STORAGE = {"lab": "float32", "lab_uint8": "uint8", "reference": "uint8 (the reference's)", "reference_float32": "float32"}
POISON_EATER = 20.0  # poison per 1k above which a seed counts as eating poison


def _overoptimisation_paths(root: Path) -> list[ov.SeedPath]:
    """Every (mode, seed) path of the records, as `ppo-lab goodhart-report` reads them; a record
    without evaluations along training is refused, not left out."""
    paths, skipped = ov.load_paths([root / OVEROPTIMISATION])
    if skipped:
        raise ValueError(f"{OVEROPTIMISATION}: {skipped[0]}")
    return paths


def overoptimisation(root: Path) -> str:
    """The Goodhart report's shape lines and tables (`ppo-lab goodhart-report` on the records),
    and its figure."""
    paths = _overoptimisation_paths(root)
    name = Path(OVEROPTIMISATION_FIGURE).name
    return (ov.markdown(paths) + f"\n![The true objective against d = sqrt(KL(pi || pi_initial)) per mode, seeds thin, "
            f"the mean bold; below, against env steps with what the mode pays]({name})")


def overoptimisation_figure(root: Path, path: Path) -> None:
    from ppo_lab.analysis.figures import plt
    plt.close(ov.plot(_overoptimisation_paths(root), path))


# docs/results.md's table of the modes: the final survival evaluation of the same runs.
RESULTS_PAGE = "docs/results.md"
MODE_COLUMNS = (("efficiency_per_life", "efficiency per life"), ("food_share", "food share"),
                ("energy_per_1k", "energy / 1k"), ("survival_mean", "survival"), ("deaths_per_1k", "deaths / 1k"),
                ("food_per_1k", "food / 1k"), ("poison_per_1k", "poison / 1k"))
GREEDY_COLUMNS = (("energy_per_1k_greedy", "energy / 1k, greedy"), ("efficiency_per_life_greedy", "efficiency per life, greedy"))
TESTED = "energy_per_1k"


def modes(root: Path) -> str:
    """Per mode, the final survival evaluation (sampled play; then greedy), mean [95% CI] over
    seeds as the Goodhart report's mode table gives it; Welch's t of every pair of modes on
    energy per 1k, Bonferroni over the pairs."""
    col = collect([root / OVEROPTIMISATION])
    columns = MODE_COLUMNS + GREEDY_COLUMNS
    cells = {(r["mode"], r["metric"]): r for r in report.mode_table(col, [m for m, _ in columns])}
    found = report.modes_in(col)

    def table(cols):
        rows = [[mode, str(cells[(mode, cols[0][0])]["n_seeds"]),
                 *[tb.interval(cells[(mode, m)]["mean"], cells[(mode, m)]["ci_low"], cells[(mode, m)]["ci_high"])
                   for m, _ in cols]] for mode in found]
        return tb.table(["mode", "seeds", *[h for _, h in cols]], ["l", "r", *["r"] * len(cols)], rows)

    tests = [[f"{r['a']} - {r['b']}", tb.num(r["mean_a"] - r["mean_b"]), f"{r['t']:.2f}", tb.pvalue(r["p"]),
              tb.pvalue(r["p_bonferroni"]), f"{r['cohens_d']:.2f}"]
             for r in report.pairwise_tests(col, [TESTED])]
    parts = ["Sampled play:", table(MODE_COLUMNS), "Greedy play (argmax, the same worlds):", table(GREEDY_COLUMNS)]
    if not tests:
        return "\n\n".join(parts + [f"One mode recorded ({found[0]}): no pair of modes to test."])
    return "\n\n".join(parts + [
        f"Welch's t on energy per 1k (sampled), every pair of modes, Bonferroni over the {len(tests)} pairs:",
        tb.table(["modes", "difference of means", "t", "p", "p (Bonferroni)", "Cohen's d"], ["l", "r", "r", "r", "r", "r"],
                 tests)])


def one_level_up(root: Path) -> str:
    """Per arm the selected and the median member, mean over populations; then each PBT arm
    against random search: the difference of means with its interval, P(A > B) and Welch's p."""
    col = collect_groups({label: [root / ONE_LEVEL_UP / name] for name, label in ARMS.items()})
    rep = pop.population_report(col, metric=TRUE, also=(ENERGY, POISON))
    g = rep["groups"]

    def cell(arm: str, metric: str, stat: str) -> str:
        e = g[arm][stat] if metric == TRUE else g[arm]["also"][metric][stat]
        return tb.interval(e["point"], e["ci_low"], e["ci_high"])

    columns = [(m, s) for m in (TRUE, ENERGY, POISON) for s in (pop.SELECTED, "median")]
    names = {TRUE: "true obj.", ENERGY: "energy/1k", POISON: "poison/1k"}
    main = tb.table(["arm", *[f"{names[m]} {s}" for m, s in columns]], ["l", *["l"] * len(columns)],
                    [[arm, *[cell(arm, m, s) for m, s in columns]] for arm in ARMS.values()])
    tests = []
    for arm in ("PBT on pay", "PBT on the truth"):
        for metric in (TRUE, POISON):
            for stat in (pop.SELECTED, "median"):
                a, b = (_per_population(g[x], metric, stat) for x in (arm, "random search"))
                low, high, _ = es.difference_interval(a, b)
                diff = float(sum(a) / len(a) - sum(b) / len(b))
                p = es.probability_of_improvement(a, b)
                tests.append([f"{arm} - random search", names[metric], stat, tb.interval(diff, float(low), float(high)),
                              tb.num(p, places=2), f"{tb.pvalue(es.welch_t_test(a, b)[1])} ({len(a)} + {len(b)})"])
    return main + "\n\n" + tb.table(["arms", "metric", "member", "difference [95% CI]", "P(A > B)", "Welch p (populations)"],
                                    ["l"] * 6, tests)


def _per_population(group: dict, metric: str, stat: str) -> list[float]:
    return [r[stat] if metric == TRUE else r["also"][metric][stat] for r in group["populations"]]


def _fidelity_table(recipe: str):
    """The renderer of a recipe's table: per mode and storage, each survival metric's mean [95%
    CI] over seeds, and the seeds that eat poison."""
    def render(root: Path) -> str:
        col, rows = collect([root / FIDELITY]), []
        for mode in dict.fromkeys(m for m, _ in fidelity.cells_in(col)):
            for cell in RECIPES[recipe]:
                values = {m: report.seed_values(col, (mode, cell), m, fidelity.cell_of_group) for m, _ in COLUMNS}
                rows.append([mode, STORAGE[cell], *[tb.mean_ci(values[m], f"eval/{m}") for m, _ in COLUMNS],
                             tb.count(p > POISON_EATER for p in values["poison_per_1k"] if not math.isnan(p))])
        header = ["mode", "rollout storage", *[h for _, h in COLUMNS], f"seeds eating > {POISON_EATER:g} poison per 1k"]
        return tb.table(header, ["l", "l", *["r"] * (len(header) - 2)], rows)
    return render


def storage_tests(root: Path) -> str:
    """Welch's t of float32 against uint8 storage within each recipe and mode, Bonferroni over
    the comparisons of each metric."""
    rows = [[r["mode"], f"{r['a']} - {r['b']}", dict(COLUMNS)[r["metric"]], f"{r['t']:.2f}", tb.pvalue(r["p"]),
             tb.pvalue(r["p_bonferroni"]), f"{r['cohens_d']:.2f}"]
            for r in fidelity.pairwise_tests(collect([root / FIDELITY]), [m for m, _ in COLUMNS[:4]])]
    rows.sort(key=lambda r: (r[0], r[1]))
    return tb.table(["mode", "cells", "metric", "t", "p", "p (Bonferroni)", "Cohen's d"], ["l", "l", "l", "r", "r", "r", "r"], rows)


BLOCKS = (
    Block("goodhart-overoptimisation", PAGE, (OVEROPTIMISATION,), overoptimisation, measure=measured_by("goodhart"),
          figure=Figure(OVEROPTIMISATION_FIGURE, overoptimisation_figure)),
    Block("goodhart-one-level-up", PAGE, (ONE_LEVEL_UP,), one_level_up, measure=measured_by("goodhart_pbt")),
    Block("goodhart-lab-recipe", PAGE, (FIDELITY,), _fidelity_table("lab"), measure=measured_by("goodhart_fidelity")),
    Block("goodhart-reference-recipe", PAGE, (FIDELITY,), _fidelity_table("reference"),
          measure=measured_by("goodhart_fidelity")),
    Block("goodhart-storage-tests", PAGE, (FIDELITY,), storage_tests, measure=measured_by("goodhart_fidelity")),
)

RESULTS_BLOCKS = (
    Block("goodhart-modes", RESULTS_PAGE, (OVEROPTIMISATION,), modes, measure=measured_by("goodhart")),
)
