"""The run-directory layer: typed metrics.csv, truncation, atomic writes, jobs.json, checkpoints,
and the format every command checks first."""

from __future__ import annotations

import dataclasses
import json
import math
import os

import pytest

from conftest import metric_rows, run_cli, stamp_format
from ppo_lab import __version__, rundir
from ppo_lab.errors import RunDirFormatError
from ppo_lab.analysis.figures import metrics_frame
from ppo_lab.rundir import slurm_jobs
from ppo_lab.rundir import checkpoints


def test_metrics_typed_round_trip(tmp_path):
    path = tmp_path / rundir.METRICS
    rundir.MetricsCSV(path).append(metric_rows([1, 2, 3]))
    rows = rundir.read_metrics(path)
    assert rundir.read_header(path) == ["update", "seed", "timesteps", "wall_s", "actions/left", "perf/sps", "train/entropy",
                                        "train/mean_episode_return"]  # the key columns, then every metric sorted
    assert len(rows) == 6
    first = rows[0]
    assert type(first["update"]) is int and type(first["seed"]) is int and type(first["timesteps"]) is int
    assert type(first["wall_s"]) is float and first["wall_s"] == 0.1
    assert math.isnan(rows[2]["train/mean_episode_return"])  # update 2 ended no episode: written blank, read NaN
    assert rows[5] == {"update": 3, "seed": 1, "timesteps": 192, "wall_s": pytest.approx(0.3), "actions/left": 0.5,
                       "perf/sps": 1000.0, "train/entropy": pytest.approx(1.67), "train/mean_episode_return": 31.0}
    assert [r["update"] for r in rundir.read_seed_rows(path, 1, after=1, before=3)] == [2]
    assert [(r["update"], r["seed"]) for r in rundir.read_recent_rows(path, 2)] == [(2, 0), (3, 0), (2, 1), (3, 1)]
    frame = metrics_frame(path)
    assert str(frame["update"].dtype) == "int64" and str(frame["train/entropy"].dtype) == "float64"
    by_seed = rundir.columns_by_seed(path)
    assert list(by_seed[1]["timesteps"]) == [64.0, 128.0, 192.0]


def test_a_torn_last_line_is_not_read(tmp_path):
    path = tmp_path / rundir.METRICS
    rundir.MetricsCSV(path).append(metric_rows([1, 2]))
    with path.open("a") as f:
        f.write("3,0,192,1.")  # a process killed mid-write
    assert [r["update"] for r in rundir.read_metrics(path)] == [1, 1, 2, 2]


def test_a_value_that_is_not_a_number_is_named(tmp_path):
    path = tmp_path / rundir.METRICS
    path.write_text("update,seed,timesteps,wall_s,train/entropy\r\n1,0,64,0.5,oops\r\n")
    with pytest.raises(rundir.MetricsFileError, match="train/entropy.*oops"):
        rundir.read_metrics(path)


def test_truncate_after_keeps_the_kept_lines_byte_for_byte(tmp_path):
    path = tmp_path / rundir.METRICS
    writer = rundir.MetricsCSV(path)
    writer.append(metric_rows([1, 2, 3, 4]))
    lines = path.read_bytes().splitlines(keepends=True)
    assert writer.truncate_after(2) == 4
    assert path.read_bytes() == b"".join(lines[:5])  # header + updates 1 and 2, two seeds each
    assert writer.truncate_after(2) == 0
    writer.append(metric_rows([3]))  # the resumed run appends after the cut
    assert [(r["update"], r["seed"]) for r in rundir.read_metrics(path)][-2:] == [(3, 0), (3, 1)]
    assert rundir.MetricsCSV(tmp_path / "absent.csv").truncate_after(1) == 0


def test_copy_rows_until(tmp_path):
    src, dst = tmp_path / "a.csv", tmp_path / "b.csv"
    rundir.MetricsCSV(src).append(metric_rows([1, 2, 3]))
    rundir.copy_rows_until(src, dst, 2)
    assert [r["update"] for r in rundir.read_metrics(dst)] == [1, 1, 2, 2]
    assert rundir.MetricsCSV(dst).columns == rundir.read_header(src)


def test_metrics_tail_reads_only_new_rows_and_sees_a_cut(tmp_path):
    path = tmp_path / rundir.METRICS
    tail = rundir.MetricsTail(path)
    assert tail.read_new() == ([], False)
    writer = rundir.MetricsCSV(path)
    writer.append(metric_rows([1, 2]))
    rows, cut = tail.read_new()
    assert len(rows) == 4 and not cut
    writer.append(metric_rows([3]))
    assert [r["update"] for r in tail.read_new()[0]] == [3, 3]
    writer.truncate_after(1)
    rows, cut = tail.read_new()
    assert cut and [r["update"] for r in rows] == [1, 1]


def test_a_new_metric_widens_the_header_and_no_value_is_dropped(tmp_path, caplog):
    path = tmp_path / rundir.METRICS
    tail = rundir.MetricsTail(path)
    writer = rundir.MetricsCSV(path)
    writer.append(metric_rows([1]))
    assert len(tail.read_new()[0]) == 2
    later = [dict(r, **{"eval/late": 7.0}) for r in metric_rows([2])]
    rundir.MetricsCSV(path).append(later)  # a resumed run of a newer version: a fresh writer
    writer.append([dict(r, **{"a/first": 1.0}) for r in metric_rows([3])])  # the old writer learns the new header too
    assert "new metric(s) eval/late" in caplog.text
    header = rundir.read_header(path)
    assert header[:4] == rundir.KEY_COLUMNS and header[4:] == sorted(header[4:]) and {"eval/late", "a/first"} <= set(header)
    rows = rundir.read_metrics(path)
    assert [r["update"] for r in rows] == [1, 1, 2, 2, 3, 3]
    assert [r["eval/late"] for r in rows[2:4]] == [7.0, 7.0] and math.isnan(rows[0]["eval/late"])
    assert [r["a/first"] for r in rows[4:]] == [1.0, 1.0] and math.isnan(rows[2]["a/first"])
    assert rows[0]["train/entropy"] == pytest.approx(0.69)  # the old values moved with their column
    # A dashboard tailing the file sees the rewrite and reads every row again.
    new, reread = tail.read_new()
    assert reread and len(new) == 6 and "eval/late" in tail.columns


def test_write_table_keeps_a_column_the_caller_did_not_list(tmp_path):
    rundir.write_table(tmp_path / "t.csv", [{"group": "g", "mean": 1.0}, {"group": "h", "mean": 2.0, "extra": 3}],
                       ["group", "mean"])
    assert (tmp_path / "t.csv").read_text().splitlines() == ["group,mean,extra", "g,1.0,", "h,2.0,3"]


def test_atomic_write_fsyncs_the_file_and_then_its_directory(tmp_path, monkeypatch):
    import stat

    synced = []
    real = os.fsync

    def fsync(fd):
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    rundir.write_text_atomic(tmp_path / "summary.json", "{}")
    assert synced == ["file", "dir"]  # the data before the rename, the rename after it


def test_atomic_writes_leave_no_temporary_file(tmp_path):
    run = tmp_path / "run"
    rundir.write_config(run, {"seed": 3, "env": {"name": "cartpole"}})
    rundir.write_summary(run, rundir.RunSummary())
    rundir.write_summary(run, rundir.RunSummary(status="completed", updates=4))
    rundir.write_benchmark(run, rundir.RunSummary(sps=1.5), None)
    rundir.write_error(run, "ConfigError: bad")
    rundir.write_jobs(run, {"launcher": "local", "jobs": {}})
    writer = rundir.MetricsCSV(run / rundir.METRICS)
    writer.append(metric_rows([1, 2]))
    writer.truncate_after(1)
    rundir.copy_rows_until(run / rundir.METRICS, run / "copy.csv", 1)
    rundir.write_table(run / rundir.AGGREGATE, [{"group": "g", "mean": math.nan}], ["group", "mean"])
    checkpoints.write_checkpoint(run / rundir.CHECKPOINTS, 4, b"state", {"update": 4})
    names = sorted(p.name for p in run.rglob("*"))
    assert not [n for n in names if n.endswith(".tmp") or n.startswith(".")], names
    assert rundir.read_config(run)["seed"] == 3
    assert rundir.read_summary(run) == rundir.RunSummary(status="completed", updates=4)
    assert rundir.read_benchmark(run)["sps"] == 1.5
    assert rundir.read_error(run) == "ConfigError: bad"
    assert (run / rundir.AGGREGATE).read_text().splitlines() == ["group,mean", "g,"]


def test_a_failed_write_keeps_the_old_file_and_no_temporary(tmp_path):
    rundir.write_summary(tmp_path, rundir.RunSummary())
    with pytest.raises(TypeError):
        rundir.write_summary(tmp_path, rundir.RunSummary(status=object()))
    assert rundir.read_summary(tmp_path) == rundir.RunSummary()
    assert [p.name for p in tmp_path.iterdir()] == [rundir.SUMMARY]


def test_summary_json_round_trips_through_its_dataclass_and_refuses_what_it_does_not_know(tmp_path):
    """Every field the run writes comes back typed; `skipped` (a relaunch's answer) is never
    written; a key the record does not have, or a file that is no object, is refused naming it."""
    summary = rundir.RunSummary(status="completed", seeds=[0, 1], updates=4, eval={"episode_return": [1.0, None]},
                                pbt={"best_member": 1}, skipped=True)
    rundir.write_summary(tmp_path, summary)
    written = json.loads((tmp_path / rundir.SUMMARY).read_text())
    assert "skipped" not in written and written["eval"] == {"episode_return": [1.0, None]}
    assert rundir.read_summary(tmp_path) == dataclasses.replace(summary, skipped=False)
    assert rundir.read_summary(tmp_path / "nowhere") is None
    (tmp_path / rundir.SUMMARY).write_text(json.dumps({**written, "efficiency": 1.0, "colour": "red"}))
    with pytest.raises(ValueError, match="summary.json: keys this lab's summary does not have: colour, efficiency"):
        rundir.read_summary(tmp_path)
    (tmp_path / rundir.SUMMARY).write_text("[1, 2]")
    with pytest.raises(ValueError, match="not list"):
        rundir.read_summary(tmp_path)


def test_jobs_json_round_trip(tmp_path):
    assert rundir.read_jobs(tmp_path) == {}
    record = {"launcher": "slurm", "wait": False, "jobs": {
        "0": {"num": 0, "job_id": "12_0", "overrides": ["seed=0"], "state": "COMPLETED", "outcome": "completed", "error": None},
        "1": {"num": 1, "job_id": "12_1", "overrides": ["seed=1"], "state": "CANCELLED by 1000", "outcome": "failed", "error": "x"}}}
    slurm_jobs.write_jobs(tmp_path, record)
    assert rundir.read_jobs(tmp_path) == record
    assert slurm_jobs.submitted_without_waiting(tmp_path)
    jobs = slurm_jobs.jobs_by_number(tmp_path, refresh=False)
    assert sorted(jobs) == [0, 1] and jobs[1]["overrides"] == ["seed=1"]
    assert slurm_jobs.final_state(jobs[1]["state"]) and slurm_jobs.failed_state(jobs[1]["state"])
    assert not slurm_jobs.failed_state(jobs[0]["state"]) and not slurm_jobs.final_state("RUNNING")


def test_checkpoint_listing_counts_only_complete_checkpoints(tmp_path):
    ckpt = tmp_path / rundir.CHECKPOINTS
    assert checkpoints.latest_checkpoint(ckpt) is None and not rundir.has_checkpoint(ckpt)
    for update in (2, 10, 4):
        checkpoints.write_checkpoint(ckpt, update, b"x", {"update": update})
    (ckpt / "ckpt_12.json").write_text("{}")  # its state file never came: not a checkpoint
    assert [p.name for p in rundir.list_checkpoints(ckpt)] == ["ckpt_2.json", "ckpt_4.json", "ckpt_10.json"]
    meta = rundir.read_json(checkpoints.latest_checkpoint(ckpt))  # stamped with its format and checksums
    assert {k: v for k, v in meta.items() if k not in ("format_version", "lab_version", "payload", "meta_sha256")} == {"update": 10}
    assert meta["payload"]["bytes"] == 1 and meta["format_version"] == "1.0"
    checkpoints.prune(ckpt, keep=2)
    assert [p.name for p in rundir.list_checkpoints(ckpt)] == ["ckpt_4.json", "ckpt_10.json"]
    assert not (ckpt / "ckpt_2.msgpack").exists()


# sacct's own output (Slurm 22.05, `sacct -o JobID,State,NodeList --parsable2`, the call
# submitit's watcher makes): a pending array as a range with a throttle, a running task and its
# steps, a preempted job, a requeued one, a cancelled one. PREEMPTED comes from a cluster that
# preempts; the local test cluster has no preemption, so these lines stand in for it here
# (tests/cluster/test_slurm_states.py has requeue and unlisted tasks for real).
SACCT_LINES = """JobID|State|NodeList
40_[2-3%1]|PENDING|None assigned
40_0|COMPLETED|vm
40_0.batch|COMPLETED|vm
40_1|RUNNING|vm
40_1.batch|RUNNING|vm
41|PREEMPTED|vm
42|REQUEUED|vm
43|CANCELLED by 0|vm
"""


@pytest.fixture
def fake_sacct(tmp_path, monkeypatch):
    """A `sacct` on PATH that prints SACCT_LINES whatever it is asked."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sacct").write_text(f"#!/bin/sh\ncat <<'END'\n{SACCT_LINES}END\n")
    (bin_dir / "sacct").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


# --- the run dir's format: one check, every command ---------------------------------------------

OLDER_COMMIT = "1930332f0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f"


def _older_run(path, manifest: bool = True, checkpoint_format: int | None = 5):
    """A run dir as a lab before 1.0 left it: its manifest.json (where it kept one) names no
    format, only the lab's commit and its version among the packages; its checkpoints' meta has
    an integer format (from format 3 on) or none."""
    (path / "checkpoints").mkdir(parents=True)
    (path / "config.yaml").write_text("experiment: cartpole\nseed: 0\nnum_seeds: 1\nenv: {name: cartpole}\n")
    (path / "metrics.csv").write_text("update,seed,timesteps,wall_s\n1,0,64,0.1\n")
    (path / "summary.json").write_text(json.dumps({"status": "completed", "seeds": [0], "eval": {"episode_return": [9.0]}}))
    if manifest:
        (path / "manifest.json").write_text(json.dumps({"lab": {"commit": OLDER_COMMIT, "dirty": False},
                                                        "packages": {"jax": "0.10.2", "ppo_lab": "0.1.0"}}))
    meta = {"update": 1} if checkpoint_format is None else {"update": 1, "format_version": checkpoint_format}
    (path / "checkpoints" / "ckpt_1.json").write_text(json.dumps(meta))
    (path / "checkpoints" / "ckpt_1.msgpack").write_bytes(b"\x81\xa6params\x80")
    return path


def _files(path) -> dict:
    return {p: p.stat().st_mtime_ns for p in sorted(path.rglob("*"))}


def test_a_fresh_dir_or_one_of_this_format_passes_the_check(tmp_path):
    (tmp_path / "fresh" / ".hydra").mkdir(parents=True)  # what Hydra makes before a run writes anything
    rundir.check_format(tmp_path / "fresh")
    rundir.check_format(stamp_format(tmp_path / "ours"))
    (tmp_path / "ours" / "config.yaml").write_text("seed: 0\n")
    rundir.check_format(tmp_path / "ours")


@pytest.mark.parametrize("older, its_format, lab", [
    (dict(), "a format before 1.0 (checkpoint format 5)", f"ppo_lab 0.1.0 at commit {OLDER_COMMIT[:12]}"),
    (dict(manifest=False, checkpoint_format=None), "a format before 1.0 (unversioned checkpoints)", None),
])
def test_an_older_run_dir_is_refused_in_one_line_naming_its_format_and_lab(tmp_path, older, its_format, lab):
    run = _older_run(tmp_path / "old", **older)
    with pytest.raises(RunDirFormatError) as info:
        rundir.check_format(run)
    by = lab or "a ppo_lab before 1.0 (it records no version)"
    use = lab or "the ppo_lab that wrote it"
    assert str(info.value) == (f"the run directory {run} is of {its_format}, written by {by}; this ppo_lab {__version__} "
                               f"reads format 1.0 only: train again in a new run directory, or use {use} to resume or "
                               f"read it")


def test_a_newer_labs_run_dir_is_refused_naming_its_format(tmp_path):
    run = _older_run(tmp_path / "new")
    (run / "manifest.json").write_text(json.dumps({"format_version": "2.0", "lab_version": "2.3.0"}))
    with pytest.raises(RunDirFormatError, match=r"is of format 2\.0, written by ppo_lab 2\.3\.0; .* or use ppo_lab 2\.3\.0 "):
        rundir.check_format(run)
    (run / "manifest.json").write_text("{")  # damaged: its format cannot be told
    with pytest.raises(RunDirFormatError, match="cannot tell the run directory's format"):
        rundir.check_format(run)


@pytest.mark.parametrize("command", [
    ["evaluate", "{run}"], ["replay", "{run}"], ["reproduce", "{run}", "--updates", "1", "--out", "{tmp}/again"],
    ["plots", "{run}"], ["watch", "{run}", "--once"], ["watch", "{sweep}", "--once"], ["aggregate", "{sweep}"],
    ["compare", "{run}", "{run}"], ["zoo-table", "{sweep}", "--out", "{tmp}/page.md"], ["resume", "{run}"],
    ["goodhart-report", "{sweep}", "--out", "{tmp}/report"],
], ids=["evaluate", "replay", "reproduce", "plots", "watch", "watch-a-folder", "aggregate", "compare", "zoo-table",
        "resume", "goodhart-report"])
def test_every_command_that_loads_a_run_dir_refuses_an_older_one_in_one_line(tmp_path, capsys, command):
    run = _older_run(tmp_path / "sweep" / "0")
    before = _files(tmp_path)
    proc = run_cli([a.format(run=run, sweep=tmp_path / "sweep", tmp=tmp_path) for a in command], capsys)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"ppo-lab {command[0]}: the run directory {run} is of a format before 1.0 (checkpoint format " \
                          f"5), written by ppo_lab 0.1.0 at commit {OLDER_COMMIT[:12]}; this ppo_lab {__version__} reads " \
                          f"format 1.0 only: train again in a new run directory, or use ppo_lab 0.1.0 at commit " \
                          f"{OLDER_COMMIT[:12]} to resume or read it\n"
    assert _files(tmp_path) == before  # nothing written


def test_slurm_states_through_submitits_watcher(fake_sacct):
    ids = ["40_0", "40_1", "40_2", "40_3", "40_9", "41", "42", "43"]
    states = slurm_jobs.sacct_states(ids)
    assert states == {"40_0": "COMPLETED", "40_1": "RUNNING", "40_2": "PENDING", "40_3": "PENDING", "41": "PREEMPTED",
                      "42": "REQUEUED", "43": "CANCELLED by 0"}  # 40_9: not listed, not guessed
    done = {j for j in ids if slurm_jobs.final_state(states.get(j))}
    failed = {j for j in ids if slurm_jobs.failed_state(states.get(j))}
    assert done == {"40_0", "43"} and failed == {"43"}  # preempted and requeued: neither done nor failed


def test_waiting_is_bounded_for_an_unlisted_task_and_a_preemption_never_requeued(fake_sacct, tmp_path, capsys):
    slurm_jobs.write_jobs(tmp_path, {"launcher": "slurm", "jobs": {
        str(i): {"num": i, "job_id": j} for i, j in enumerate(["40_0", "40_9", "41", "43"])}})
    gave_up = slurm_jobs.wait_for_jobs([tmp_path], timeout_s=30, poll_s=0.05, limbo_s=0.2)
    assert gave_up == {"40_9": "unknown: not listed by sacct", "41": "PREEMPTED"}
    out = capsys.readouterr().out
    assert "stopped waiting for job 40_9" in out and "stopped waiting for job 41" in out
    slurm_jobs.write_jobs(tmp_path, {"launcher": "slurm", "jobs": {"0": {"num": 0, "job_id": "42"}}})
    with pytest.raises(TimeoutError, match=r"42 \(REQUEUED\)"):  # a requeued job is waited on
        slurm_jobs.wait_for_jobs([tmp_path], timeout_s=0.3, poll_s=0.05, limbo_s=0.1)
