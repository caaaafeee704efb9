"""README.md's block: the closing summary a run prints, rendered from that run's record by the
function the run prints it with (`judging/closing.py`)."""

from __future__ import annotations

from pathlib import Path

from ppo_lab import rundir
from ppo_lab.judging.closing import closing_lines
from ppo_lab.pages import records as rec
from ppo_lab.pages.block import Block

CLOSING = "docs/records/readme/cartpole_two_seeds"


def closing_summary(root: Path) -> str:
    found = rec.run(root, CLOSING)
    config = rec.config(root, CLOSING)
    source = str(rundir.read_json(root / CLOSING / rundir.RECORD)["from"])
    shown = Path(source[source.index("outputs/"):]) if "outputs/" in source else Path(source)  # as the user saw it
    mode = "greedy" if config["eval"]["deterministic"] else "sampled"
    lines = closing_lines(found.summary, shown, eval_mode=mode, resume_command=None, env=config["env"])
    return "```\n" + "\n".join(lines) + "\n```"


BLOCKS = (Block("closing-summary", "README.md", (CLOSING,), closing_summary),)
