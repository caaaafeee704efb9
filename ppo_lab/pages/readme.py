"""README.md's block: the closing summary a run prints, rendered from that run's record by the
function the run prints it with (`judging/closing.py`)."""

from __future__ import annotations

from pathlib import Path

from ppo_lab import rundir
from ppo_lab.judging.closing import closing_lines
from ppo_lab.pages import records as rec
from ppo_lab.pages.block import Block, measured_by

CLOSING = "docs/records/readme/cartpole_two_seeds"
USER_RUNS = "outputs/runs/"


def closing_summary(root: Path) -> str:
    found = rec.run(root, CLOSING)
    config = rec.config(root, CLOSING)
    source = str(rundir.read_json(root / CLOSING / rundir.RECORD)["from"])
    # As a user's default run dir shows it: from its last `outputs/runs/` (the record's run dir
    # was made under a measurement's own folder, e.g. /work/outputs/x/readme/outputs/runs/...).
    at = source.rfind(USER_RUNS)
    shown = Path(source[at:]) if at >= 0 else Path(source)
    mode = "greedy" if config["eval"]["deterministic"] else "sampled"
    lines = closing_lines(found.summary, shown, eval_mode=mode, resume_command=None, env=config["env"])
    command = " ".join(f"{k}={v}" for k, v in found.overrides.items() if not k.startswith("hydra"))
    return "```\n" + "\n".join([f"$ python launch.py {command}", *lines]) + "\n```"


BLOCKS = (Block("closing-summary", "README.md", (CLOSING,), closing_summary, measure=measured_by("readme")),)
