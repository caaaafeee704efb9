"""Both notebooks run with papermill on a small sweep, without error, and draw their figures.

aggregate_seeds.ipynb runs on a real tiny CartPole sweep (2 jobs x 2 vmapped seeds);
goodhart_report.ipynb on a hand-written sweep of the five reward modes in the run dir contract,
with evaluations along training of known shape (training the foraging world for every mode is
too slow for this suite).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT, TINY
from test_overoptimisation import goodhart_sweep_along

nbformat = pytest.importorskip("nbformat")
papermill = pytest.importorskip("papermill")


def execute(name: str, tmp_path, sweep_dir) -> "nbformat.NotebookNode":
    out = tmp_path / f"{name}.out.ipynb"
    papermill.execute_notebook(str(ROOT / "notebooks" / f"{name}.ipynb"), str(out), parameters={"sweep_dir": str(sweep_dir)},
                               cwd=str(ROOT / "notebooks"), kernel_name="python3", progress_bar=False)
    nb = nbformat.read(out, as_version=4)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors
    return nb


def images(nb) -> int:
    return sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_aggregate_seeds_notebook_on_a_real_sweep(tmp_path):
    sweep = tmp_path / "sweep"
    proc = subprocess.run([sys.executable, "launch.py", "-m", *TINY, "seed=0,2", "num_seeds=2", f"hydra.sweep.dir={sweep}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    nb = execute("aggregate_seeds", tmp_path, sweep)
    assert images(nb) >= 3  # rliable's aggregates, learning curves, per-seed spread
    assert (sweep / "curves.png").exists() and (sweep / "seed_spread.png").exists() and (sweep / "rliable.png").exists()
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "4 seeds (4 used)" in text
    assert "rliable (eval/episode_return" in text and "WARNING: fewer than 5 seeds" in text


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_goodhart_report_notebook(tmp_path):
    sweep = goodhart_sweep_along(tmp_path / "goodhart")
    nb = execute("goodhart_report", tmp_path, sweep)
    assert images(nb) >= 5  # three bar plots, the Goodhart curves, the true objective along training
    for name in ("efficiency_per_life", "food_share", "energy_per_1k", "curves"):
        assert (sweep / f"goodhart_{name}.png").stat().st_size > 1000
    assert (sweep / "overoptimisation.png").stat().st_size > 1000
    markdown = "".join(o.get("data", {}).get("text/markdown", "") for c in nb.cells for o in c.get("outputs", []))
    assert "| permutation | 0.100 | 0.400 | 3 + 3 |" in markdown
    html = "".join(o.get("data", {}).get("text/html", "") for c in nb.cells for o in c.get("outputs", []))
    assert "reference" in html and "proxy_mortal" in html and "144.6" in html
    assert "efficiency_per_life_greedy" in html and "ground_truth_blind" in html and "cohens_d" in html
