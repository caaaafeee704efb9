"""Recorded runs, one set per CPU: `tests/fixtures/<kind>/<cpu_id>/<name>/`, each set with a
`cpu.json` saying which CPU recorded it (`ppo_lab.host_cpu`).

XLA:CPU compiles for the CPU it runs on, so a tiny run recorded on one CPU may differ from the
same run on another in the last digits (seen: every recorded run of the project's Intel Xeon
differed on an AMD EPYC from update 1 or 2). So a test that requires a run bit for bit compares
it with the recording of *this* CPU where there is one, and requires it identical. On a CPU with
no recording it cannot check bits: it requires the run identical to some recording or, failing
that, within `RTOL`/`ATOL` of one (what another instruction set moves), and says with a warning
that bits were not checked and how to record this CPU's set.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ppo_lab.host_cpu import cpu_id, cpu_record, same_cpu

HERE = cpu_record()
# Between the Intel Xeon and AMD EPYC recordings of tests/test_bitwise.py's runs (4-16 updates,
# every metric, every row): the largest absolute difference 1.5e-5 (explained_variance near
# -0.2), the largest relative ones 5e-2 in values near zero (approx_kl 2.7e-8 against 2.6e-8,
# pg_loss 3.4e-7 against 3.6e-7); every value above 1e-3 in size within 8e-5 relative; one
# evaluation return -258.70117 against -258.70123. A changed computation (a loss term, an
# advantage, a schedule) moves metrics by far more than RTOL/ATOL within a few updates.
RTOL, ATOL = 1e-3, 1e-6


@dataclass
class Outcome:
    identical: bool
    within: bool  # every difference within RTOL/ATOL
    message: str  # what differs, for the assertion


def recording_sets(root: Path) -> list[tuple[Path, dict]]:
    """(folder, its cpu.json) for every set under `root`, this CPU's first."""
    sets = [(p.parent, json.loads(p.read_text())) for p in sorted(root.glob("*/cpu.json"))]
    return sorted(sets, key=lambda s: not same_cpu(s[1], HERE))


def this_cpu_set(root: Path) -> Path | None:
    return next((folder for folder, cpu in recording_sets(root) if same_cpu(cpu, HERE)), None)


def record_into(root: Path) -> Path:
    """This CPU's set, made if new (with its cpu.json): where a recording of this machine goes."""
    folder = root / cpu_id(HERE)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cpu.json").write_text(json.dumps(HERE, indent=1) + "\n")
    return folder


def recording(root: Path, name: str) -> Path:
    """`name`'s recording: this CPU's if there is one, else the first set that has it."""
    for folder, _ in recording_sets(root):
        if (folder / name).exists():
            return folder / name
    raise FileNotFoundError(f"no recording of {name} under {root}")


def names(root: Path) -> list[str]:
    """Every recorded name, in any set."""
    return sorted({p.name for folder, _ in recording_sets(root) for p in folder.iterdir() if p.is_dir()})


def require_reproduced(root: Path, name: str, compare: Callable[[Path], Outcome]) -> None:
    """Assert that `compare(recording)` holds as this module's docstring says."""
    here = this_cpu_set(root)
    if here is not None and (here / name).exists():
        outcome = compare(here / name)
        assert outcome.identical, f"{name}: differs from its recording on this CPU ({here.name}): {outcome.message}"
        return
    tried = {folder.name: compare(folder / name) for folder, _ in recording_sets(root) if (folder / name).exists()}
    assert tried, f"no recording of {name} under {root}"
    if any(o.identical for o in tried.values()):
        return
    close = [s for s, o in tried.items() if o.within]
    assert close, f"{name}: differs from every recording by more than rtol={RTOL:g}, atol={ATOL:g} " \
                  f"(this CPU: {cpu_id(HERE)}): " + "; ".join(f"{s}: {o.message}" for s, o in tried.items())
    warnings.warn(f"{name}: bit for bit not checked: no recording on this CPU ({cpu_id(HERE)}); within rtol={RTOL:g} "
                  f"of the recording on {close[0]}. Record this CPU's set: {recording_command(root)}")


def recording_command(root: Path) -> str:
    if root.name == "bitwise":
        return "PPO_LAB_RECORD_BITWISE=1 python -m pytest tests/test_bitwise.py"
    return "python scripts/record_reproduce_fixtures.py"


def recording_asked() -> bool:
    return os.environ.get("PPO_LAB_RECORD_BITWISE") == "1"
