"""The format of a run directory: which lab's files this lab reads.

`FORMAT` names the layout of everything a run leaves (docs/architecture.md, "Run directory":
the files, their fields, the checkpoints' payload). A run stamps it in manifest.json
(`format_version`, beside the lab's version, `lab_version`) when it starts, before config.yaml,
so a run dir that holds any of a run's files says which format they are in; each checkpoint's
meta carries it too (`checkpoints.stamp`).

`manifest.check_format(run_dir)` is the one check every command that loads a run dir goes
through: a relaunch into it (`ppo-lab resume`, or `train` into its dir) and `resume=OTHER_RUN`
(`ppo_lab.run.resume`), evaluate, replay and reproduce
(`config_file.load_run_config`, `config_spans`), and the readers of the analysis (aggregate,
compare, zoo-table, goodhart-report, plots, watch). A run dir of another format is
refused in one line (`refusal`): this lab carries no older layout over.
"""

from __future__ import annotations

from ppo_lab import __version__

FORMAT = "1.0"


def stamp() -> dict:
    """The fields of a run's manifest.json that tell a later lab its format."""
    return {"format_version": FORMAT, "lab_version": __version__}


def refusal(what: str, its_format: str, lab: str | None) -> str:
    """The one line that refuses `what` (a run dir, a checkpoint) of `its_format`, written by
    `lab` (None: not recorded), and says what to do instead."""
    by = f"written by {lab}" if lab else "written by a ppo_lab before 1.0 (it records no version)"
    use = lab if lab else "the ppo_lab that wrote it"
    return (f"{what} is of {its_format}, {by}; this ppo_lab {__version__} reads format {FORMAT} only: "
            f"train again in a new run directory, or use {use} to resume or read it")


def written_by(manifest: dict) -> str | None:
    """`ppo_lab <version> at commit <sha>` as a manifest.json records it (a lab before 1.0
    recorded its version among the packages), or None where it records neither."""
    lab = manifest.get("lab") if isinstance(manifest.get("lab"), dict) else {}
    version = manifest.get("lab_version") or (manifest.get("packages") or {}).get("ppo_lab")
    commit = lab.get("commit")
    if version is None and commit is None:
        return None
    return f"ppo_lab {version or '(version not recorded)'}" + (f" at commit {str(commit)[:12]}" if commit else "")
