"""A project of one's own, as docs/project.md lays it out, worked from its own folder outside the
checkout with `ppo-lab` alone (no PYTHONPATH, no hydra.searchpath typed): the page's files and
commands as written; a run stopped by Ctrl+C through `| tee` and resumed from a third folder; an
env that breaks the contract named by `ppo-lab check-env` and before any training compile; the
typo hints from the project's own files.

`PPO_LAB_COMMAND=/path/to/venv/bin/ppo-lab` runs all of it against another install (a fresh
virtualenv with the lab installed non-editable; PYTHONPATH dropped): the lab as a library."""

from __future__ import annotations

import csv
import json
import os
import re
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import PPO_LAB, ROOT, ppo_lab, read_rows, read_summary, tee_into, write_docs_project

HOME = "~/corridor_lab"  # the page's project folder and its other folder, mapped onto this test's
ELSEWHERE = "/tmp"


def page_commands() -> list[str]:
    """The lines of docs/project.md's shell blocks, comments dropped, in the page's order."""
    text = (ROOT / "docs" / "project.md").read_text()
    lines = [line.split("  #")[0].strip() for block in re.findall(r"```bash\n(.*?)```", text, re.S)
             for line in block.splitlines()]
    return [line for line in lines if line.startswith(("cd ", "ppo-lab "))]


def _mapped(arg: str, project: Path, elsewhere: Path) -> str:
    for page, here in ((HOME, project), (ELSEWHERE, elsewhere)):
        if arg.startswith(page):
            return str(here) + arg[len(page):]
    return arg


@pytest.fixture
def project(tmp_path) -> Path:
    return write_docs_project(tmp_path / "corridor_lab")


def _ok(proc: subprocess.CompletedProcess, what: str) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, f"{what}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


@pytest.mark.slow
def test_the_project_page_runs_as_written(project, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    commands = page_commands()
    assert commands[0] == f"cd {HOME}" and any(c.startswith("ppo-lab resume") for c in commands), commands
    cwd, out = project, {}
    for command in commands:
        args = [_mapped(a, project, elsewhere) for a in shlex.split(command)]
        if args[0] == "cd":
            cwd = Path(args[1])
            continue
        out[command] = _ok(ppo_lab(args[1:], cwd), command)
    run = project / "outputs" / "runs" / "corridor_small" / "default"
    said = {c.split()[1]: p.stdout for c, p in out.items()}
    assert "keeps the env contract" in said["check-env"]
    summary = read_summary(run)
    assert summary["status"] == "completed" and summary["seeds"] == [0, 1] and summary["reward"] == "default"
    manifest = json.loads((run / "manifest.json").read_text())  # found by the convention, recorded
    assert manifest["user_parts"] == {"config_dirs": [str(project / "conf")], "import_dirs": {"my_envs": str(project)}}
    sweep = project / "outputs" / "sweeps" / "corridor_rewards"
    rows = list(csv.DictReader((sweep / "aggregate.csv").open()))
    assert {r["reward"] for r in rows} == {"default", "hurry"}  # a group per reward mode
    assert read_summary(sweep / "1")["reward"] == "hurry"
    assert json.loads(said["evaluate"])["seeds"] == [0, 1] and "identical" in said["reproduce"]
    assert (elsewhere / "corridor.gif").is_file()
    assert "is complete" in out[next(c for c in commands if c.startswith("ppo-lab resume"))].stdout
    # A sweep dir resumes as the sweep: its completed jobs are skipped, from any folder.
    again = _ok(ppo_lab(["resume", sweep], elsewhere), "resume the sweep")
    assert again.stdout.count("skipped (already completed)") == 2, again.stdout[-3000:]
    job = _ok(ppo_lab(["resume", sweep / "1"], elsewhere), "resume one job")  # that job alone, as a run
    assert "hydra.mode=RUN" in job.stderr and f"{sweep / '1'} is complete" in job.stdout, job.stdout[-2000:]
    # compare refuses a metric no run has, naming the close one.
    typo = ppo_lab(["compare", sweep / "0", sweep / "1", "--metric", "eval/episode_retrun"], elsewhere)
    assert typo.returncode == 2 and "did you mean eval/episode_return" in typo.stderr, typo.stderr[-2000:]


@pytest.mark.slow
def test_a_run_stopped_through_a_pipe_resumes_from_a_third_folder(project, tmp_path):
    """`ppo-lab train ... | tee log`, Ctrl+C: stopped, exit 130; its printed resume command, run
    from a folder of neither, completes it from its checkpoint."""
    run_dir = project / "outputs" / "stopped"
    cmd = [*PPO_LAB, "train", "experiment=corridor_small", "ppo.total_timesteps=4000000", "hydra.run.dir=outputs/stopped"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if os.environ.get("PPO_LAB_COMMAND"):
        env.pop("PYTHONPATH", None)
    terminal = (tmp_path / "stderr").open("w+")
    run = subprocess.Popen(cmd, cwd=project, stdout=subprocess.PIPE, stderr=terminal, process_group=0, env=env)
    tee = tee_into(tmp_path / "log", run)
    try:
        while not ((run_dir / "metrics.csv").exists() and read_rows(run_dir)):
            assert run.poll() is None, (tmp_path / "stderr").read_text()[-3000:]
            time.sleep(0.1)
        os.killpg(run.pid, signal.SIGINT)  # Ctrl+C: the terminal's foreground process group
        assert tee.wait(timeout=60) == -signal.SIGINT
        assert run.wait(timeout=300) == 130, (tmp_path / "stderr").read_text()[-3000:]
    finally:
        for proc in (run, tee):
            if proc.poll() is None:
                proc.kill()
    stopped = read_summary(run_dir)
    assert stopped["status"] == "stopped" and stopped["stop_reason"] == "signal SIGINT"
    said = (run_dir / "launch.log").read_text()  # stdout was gone: the closing summary is in the log
    assert "resume (continues from the last checkpoint): ppo-lab resume outputs/stopped" in said, said[-2000:]

    third = tmp_path / "third"
    third.mkdir()
    # The same run, to the end of a budget that may differ on resume (the corridor's return nears 1).
    resumed = _ok(ppo_lab(["resume", run_dir, "train.target_return=0.8"], third, timeout=900), "resume")
    summary = read_summary(run_dir)
    assert summary["status"] == "completed" and "target_return=0.8 reached" in summary["stop_reason"], resumed.stderr[-2000:]
    assert summary["resumed_from"] == stopped["updates"] > 0
    updates = [(int(r["update"]), int(r["seed"])) for r in read_rows(run_dir)]
    assert len(updates) == len(set(updates)) and max(u for u, _ in updates) == summary["updates"]


@pytest.mark.slow
def test_an_env_that_breaks_the_contract_is_named_by_check_env_and_before_training(project):
    code = project / "my_envs" / "corridor.py"
    scalar = "reward = arrived.astype(jnp.float32) - self.step_cost"
    assert scalar in code.read_text()
    code.write_text(code.read_text().replace(scalar, "reward = jnp.stack([arrived, arrived]).astype(jnp.float32)"))
    line = "step's reward: shape (2,) float32 per env; expected shape () float: one reward per env"
    checked = ppo_lab(["check-env", "corridor"], project)
    assert checked.returncode == 1 and line in checked.stderr and "Traceback" not in checked.stderr, checked.stderr[-3000:]
    assert "env=corridor (my_envs.corridor.build) breaks the env contract" in checked.stderr
    trained = ppo_lab(["train", "experiment=corridor_small"], project)
    assert trained.returncode == 2 and line in trained.stderr and "Traceback" not in trained.stderr, trained.stderr[-3000:]
    assert "compiled" not in trained.stdout + trained.stderr
    assert not (project / "outputs" / "runs" / "corridor_small" / "default").exists()  # nothing written


def test_typos_in_a_project_are_hinted_from_its_own_files(project):
    """The convention's search path: the project's options and keys are suggested, its preset
    without `# @package _global_` named; all before the lab loads (exit 2, no run dir)."""
    length = ppo_lab(["train", "experiment=corridor_small", "env.lenght=5"], project)
    assert length.returncode == 2 and "did you mean env.length?" in length.stderr, length.stderr
    option = ppo_lab(["train", "env=corridr"], project)
    assert option.returncode == 2 and "did you mean corridor?" in option.stderr, option.stderr
    preset = project / "conf" / "experiment" / "no_header.yaml"
    preset.write_text("defaults:\n  - override /env: corridor\n")
    headless = ppo_lab(["train", "experiment=no_header"], project)
    assert headless.returncode == 2 and f"{preset} must start with the line `# @package _global_`" in headless.stderr
    assert "Could not override 'env@experiment.env'" in headless.stderr  # Hydra's words, explained
    assert not (project / "outputs").exists()
