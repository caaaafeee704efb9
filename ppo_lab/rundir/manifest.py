"""manifest.json: a run's reproducibility record (what it takes to get the same numbers again).

Written by the run (``ppo_lab.run.manifest`` assembles it) when it starts, rewritten by each
session of a resumed run; read by ``ppo-lab reproduce``, which names the fields that differ
between the run and its reproduction. Fields: ``lab`` (commit, dirty), ``python``,
``packages`` (name -> version), ``xla_flags``, ``env_vars`` (the XLA_/JAX_ variables),
``jax_config``, ``devices`` (platform, kind -> count, local and global counts), ``cpu``
(machine, vendor, model, family, instruction-set features: ``ppo_lab.host_cpu``),
``layout``, ``process_count``, ``process_index``, ``config_hash``, ``deterministic``,
``host``, ``written_at``; and ``user_parts`` for a run with parts of the user's own
(``config_dirs``: the user's config folders on Hydra's search path; ``import_dirs``: each own
top-level module -> the folder it was imported from), which ``use_recorded_parts`` reads back
for every command that loads the run (``load_run_config``).

It also says the run dir's format (``format_version``, ``lab_version``: ``run_format.stamp``),
written before config.yaml; ``check_format`` reads it first whenever a command loads a run dir.
"""

from __future__ import annotations

from pathlib import Path

from ppo_lab import parts
from ppo_lab.config_keys import use_config_dirs
from ppo_lab.errors import RunDirFormatError
from ppo_lab.rundir.atomic import read_json, write_json_atomic
from ppo_lab.rundir.checkpoints import latest_checkpoint
from ppo_lab.rundir.paths import CHECKPOINTS, MANIFEST, has_run_files
from ppo_lab.rundir.run_format import FORMAT, refusal, written_by

# Fields that say when and where, not what was computed: not reported as differences.
UNCOMPARED = ("written_at", "host", "process_index")


def write_manifest(run_dir: Path, manifest: dict) -> None:
    write_json_atomic(Path(run_dir) / MANIFEST, manifest)


def read_manifest(run_dir: Path) -> dict | None:
    """The run's manifest.json, or None for a run written before the lab kept one."""
    return read_json(Path(run_dir) / MANIFEST, default=None)


def check_format(run_dir: Path) -> None:
    """Nothing for a run dir of this lab's format, or a folder with none of a run's files yet
    (a fresh run dir); RunDirFormatError, in one line, for any other (``run_format``)."""
    run_dir = Path(run_dir)
    if not has_run_files(run_dir):
        return
    try:
        manifest = read_manifest(run_dir)
    except ValueError as exc:  # a manifest.json that does not parse: its format cannot be told
        raise RunDirFormatError(f"{run_dir}: cannot tell the run directory's format: {exc}") from exc
    manifest = manifest if isinstance(manifest, dict) else {}
    if manifest.get("format_version") != FORMAT:
        raise RunDirFormatError(refusal(f"the run directory {run_dir}", _format_of(run_dir, manifest), written_by(manifest)))


def _format_of(run_dir: Path, manifest: dict) -> str:
    """The format of a run dir not of this one: what its manifest.json records, else (a lab
    before 1.0 stamped none) that of its newest checkpoint."""
    if manifest.get("format_version") is not None:
        return f"format {manifest['format_version']}"
    newest = latest_checkpoint(Path(run_dir) / CHECKPOINTS)
    try:
        version = None if newest is None else read_json(newest).get("format_version")
    except (OSError, ValueError):
        version = None
    if version is not None:
        return f"a format before {FORMAT} (checkpoint format {version})"
    return f"a format before {FORMAT}" + (" (unversioned checkpoints)" if newest is not None else "")


def use_recorded_parts(run_dir: Path) -> None:
    """Find the run's own parts as it found them when it trained, from any working folder and
    without its PYTHONPATH: its config folders count as conf/ again, and the folders its own
    modules were imported from go on Python's path (manifest.json's ``user_parts``). A run of
    the lab's parts alone, or one older than the manifest, adds nothing."""
    own = (read_manifest(run_dir) or {}).get("user_parts") or {}
    use_config_dirs(own.get("config_dirs") or [])
    parts.use_import_dirs((own.get("import_dirs") or {}).values())


def dotted_keys(tree: dict, prefix: str = "") -> dict:
    """Nested dicts (a config, a manifest) as dotted keys: `{"ppo.lr": 3e-4}`; lists, scalars and
    empty dicts are leaves."""
    out = {}
    for k, v in tree.items():
        out.update(dotted_keys(v, f"{prefix}{k}.") if isinstance(v, dict) and v else {f"{prefix}{k}": v})
    return out


def manifest_differences(a: dict | None, b: dict | None) -> list[tuple[str, object, object]]:
    """(dotted field, value in a, value in b) for every field that differs, when and where aside."""
    if a is None or b is None:
        return [("manifest.json", "absent" if a is None else "present", "absent" if b is None else "present")]
    fa, fb = dotted_keys(a), dotted_keys(b)
    keys = sorted(set(fa) | set(fb))
    return [(k, fa.get(k), fb.get(k)) for k in keys
            if k.split(".", 1)[0] not in UNCOMPARED and fa.get(k) != fb.get(k)]
