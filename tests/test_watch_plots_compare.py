"""The dashboard, the curves panel and the comparison, against real tiny runs."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import termios
import subprocess
import sys
import threading
import time

import pytest

from conftest import ROOT, TINY, launch, metric_rows, read_summary, resolved_config, run_cli, stamp_format

from ppo_lab import rundir
from ppo_lab.analysis import compare, watch
from ppo_lab.analysis import run_plots as plots

pytestmark = pytest.mark.slow

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A sweep-like folder: a finished 2-seed run and a benchmark of the same config."""
    root = tmp_path_factory.mktemp("sweep")
    launch([*TINY, "num_seeds=2"], root / "run_a")
    launch([*TINY, "num_seeds=2", "benchmark=true"], root / "bench_b")
    return root


def test_watch_once_shows_every_curve_of_a_run(runs, capsys):
    proc = run_cli(["watch", runs / "run_a", "--once", "--width", "220"], capsys)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for text in ("completed", "32/32", "return", "ep len", "entropy", "kl", "clip", "pg loss", "vf loss",
                 "seed 0", "seed 1", "train/approx_kl", "action distribution", "eval: episode_return", "episode_length",
                 "episode_return_sampled", "episode_return_greedy"):  # the final evaluation, both plays
        assert text in out, text
    assert "health: ok" in out or "health:" in out


def test_watch_follows_a_sweep_folder(runs):
    text = watch.snapshot(runs, width=200)
    assert "run_a" in text and "bench_b" in text
    views = watch.Dashboard(runs).refresh()
    run = next(v for v in views if v.path.name == "run_a")
    assert run.status == "completed" and run.update == 32 and sorted(run.latest) == [0, 1]
    assert len(run.returns()) == 32
    assert run.names("actions/") == ["actions/0", "actions/1"]


def test_watch_reads_only_new_lines_and_warns(tmp_path):
    """A run being written: partial lines are left for the next refresh; health warnings."""
    run = stamp_format(tmp_path / "live")  # a run dir of this format, made by hand
    (run / "config.yaml").write_text("env: {name: foraging}\nhealth: {entropy_min: 0.01, kl_min: 1.0e-4, kl_max: 0.06, clip_frac_max: 0.3}\n")
    header = "update,seed,timesteps,wall_s,actions/up,train/approx_kl,train/clip_frac,train/entropy,true/energy\n"
    (run / "metrics.csv").write_text(header + "1,0,64,0.1,0.5,0.01,0.1,1.2,3.0\n2,0,")
    view = watch.RunView(run)
    view.refresh()
    assert view.update == 1 and view.metric("true/energy") == 3.0
    with (run / "metrics.csv").open("a") as f:
        f.write("128,0.2,0.5,0.2,0.5,0.001,0.0\n")  # completes the row: entropy collapse, high KL and clip
    view.refresh()
    assert view.update == 2 and view.names("true/") == ["true/energy"]
    warnings = "\n".join(view.health())
    assert "approx_kl high" in warnings and "clip_frac high" in warnings
    assert "true/energy" in watch.snapshot(run)


def test_continuous_actions_show_mean_and_std_per_dimension(tmp_path):
    """A continuous run's `actions/mean_<i>`, `actions/std_<i>`: the dashboard tabulates them per
    dimension (no shares, no bars) and the curves panel draws them (no stacked shares)."""
    run = stamp_format(tmp_path / "pendulum")  # a run dir of this format, made by hand
    (run / "config.yaml").write_text("env: {name: gymnax}\n")
    header = "update,seed,timesteps,wall_s,actions/mean_0,actions/std_0,actions/mean_1,actions/std_1,train/entropy\n"
    rows = "".join(f"{u},{s},{64 * u},0.1,{0.1 * u + s},{1.0 / u},-0.5,0.25,1.0\n" for u in (1, 2, 3) for s in (0, 1))
    (run / "metrics.csv").write_text(header + rows)
    view = watch.RunView(run)
    view.refresh()
    table = watch.action_table(view)
    assert [c.header for c in table.columns] == ["dim", "mean", "std"]
    assert list(table.columns[0].cells) == ["0", "1"]
    assert list(table.columns[1].cells) == ["0.800", "-0.500"]  # latest update, mean over seeds 0.3 and 1.3
    assert list(table.columns[2].cells) == ["0.333", "0.250"]
    assert "actions per dimension" in watch.snapshot(run, width=200)
    assert plots.plot_run(run).read_bytes().startswith(PNG)


def _drain(fd, sink):
    try:
        while True:
            data = os.read(fd, 65536)
            if not data:
                return
            sink.append(data)
    except OSError:
        return


@pytest.mark.timeout(300)  # a guard against a dashboard that never draws, not a bound on it
def test_watch_key_writes_the_selected_runs_stop_file(tmp_path):
    """`s` then `y` on the dashboard, in a real terminal, writes the selected run's STOP file:
    here a run being written (rows, no summary yet). What a STOP file does to a training run
    is tests/test_end_to_end.py's."""
    run_dir = stamp_format(tmp_path / "long")
    rundir.write_config(run_dir, resolved_config(TINY))
    rundir.MetricsCSV(run_dir / rundir.METRICS).append(metric_rows(range(1, 5)))
    master, slave = pty.openpty()
    # A terminal large enough for the whole dashboard: in the default 80x24 the key line is cut off.
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, 200, 0, 0))
    screen = []
    ui = subprocess.Popen([sys.executable, "-m", "ppo_lab.cli", "watch", str(tmp_path), "--interval", "0.5"],
                          cwd=ROOT, stdin=slave, stdout=slave, stderr=slave, close_fds=True,
                          env={**os.environ, "LINES": "60", "COLUMNS": "200"})  # what rich reads first
    os.close(slave)
    threading.Thread(target=_drain, args=(master, screen), daemon=True).start()
    try:
        # Keys only once the dashboard is drawn (its key line is on screen).
        while b"keys:" not in b"".join(screen):
            assert ui.poll() is None, b"".join(screen)[-3000:]
            time.sleep(0.2)
        assert b"running" in b"".join(screen) and not (run_dir / rundir.STOP_FILE).exists()
        os.write(master, b"s")
        while b"press y" not in b"".join(screen):  # it asks first
            assert ui.poll() is None, b"".join(screen)[-3000:]
            time.sleep(0.1)
        os.write(master, b"y")
        while not (run_dir / rundir.STOP_FILE).exists():
            assert ui.poll() is None, b"".join(screen)[-3000:]
            time.sleep(0.1)
        os.write(master, b"q")
        assert ui.wait(timeout=60) == 0
    finally:
        if ui.poll() is None:  # never leave a process behind, whatever failed
            ui.kill()
            ui.wait(timeout=30)
    assert (run_dir / rundir.STOP_FILE).read_text().startswith("stop requested by ppo_lab.analysis.watch")
    assert b"wrote " in b"".join(screen)


def test_plots_write_a_png_panel(runs, tmp_path, capsys):
    proc = run_cli(["plots", runs / "run_a", "--out", tmp_path / "c.png"], capsys)
    assert proc.returncode == 0, proc.stderr
    data = (tmp_path / "c.png").read_bytes()
    assert data.startswith(PNG) and len(data) > 20_000
    import matplotlib.image

    height, width, _ = matplotlib.image.imread(tmp_path / "c.png").shape
    assert width > 1000 and height > 500
    assert plots.plot_run(runs / "run_a") == runs / "run_a" / "curves.png"


def test_compare_a_run_and_a_benchmark(runs, tmp_path, capsys):
    out = tmp_path / "comparison.png"
    proc = run_cli(["compare", runs / "run_a", runs / "bench_b", "--out", out, "--json"], capsys)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    for header in ("train s", "timesteps", "steps/s", "speedup", "host MB", "episode return (mean [95% CI])", "run_a", "bench_b"):
        assert header in text
    assert out.read_bytes().startswith(PNG)
    records = compare.compare([runs / "run_a", runs / "bench_b"])
    a, b = records
    assert a["kind"] == "run" and b["kind"] == "benchmark"
    assert a["speedup"] == 1.0 and b["speedup"] > 0
    assert a["timesteps"] == 2 * 2048 and b["timesteps"] == 2 * 2048
    assert a["final_return"] == pytest.approx(sum(read_summary(runs / "run_a")["eval"]["episode_return"]) / 2)
    assert b["final_return"] is not None and b["peak_host_memory_mb"] > 0
    bench = json.loads((runs / "bench_b" / "benchmark.json").read_text())
    assert b["sps"] == bench["sps"]


def test_compare_refuses_a_metric_no_input_has(runs, tmp_path, capsys):
    """A typo compares nothing: exit 2, the closest name and every valid one, nothing written."""
    out = tmp_path / "c.png"
    proc = run_cli(["compare", runs / "run_a", runs / "bench_b", "--out", out, "--metric", "eval/episode_retrun"], capsys)
    assert proc.returncode == 2 and not out.exists()
    assert "--metric eval/episode_retrun: no input has it; did you mean eval/episode_return?" in proc.stderr
    assert "valid: " in proc.stderr and "eval/episode_length" in proc.stderr and "train/entropy" in proc.stderr


def test_comparison_png_goes_beside_the_runs_not_the_working_dir(tmp_path):
    for run in ("sweep/0", "sweep/1", "other/x"):
        (tmp_path / run).mkdir(parents=True)
    assert compare.default_out([tmp_path / "sweep/0", tmp_path / "sweep/1"]) == tmp_path / "sweep" / "comparison.png"
    assert compare.default_out([tmp_path / "sweep/0", tmp_path / "other/x"]) == tmp_path / "comparison.png"


def test_a_constant_metric_is_a_note_not_a_panel():
    import pandas as pd

    assert plots._constant_value(pd.Series([0.0, float("nan"), 0.0])) == 0.0
    assert plots._constant_value(pd.Series([0.0, 1.0])) is None


def test_compare_needs_run_or_benchmark_dirs(tmp_path, capsys):
    proc = run_cli(["compare", tmp_path, tmp_path], capsys)
    assert proc.returncode == 2 and "neither summary.json nor benchmark.json" in proc.stderr


def test_a_run_figure_for_a_paper(tmp_path, capsys):
    """Axis labels with units, the env's action order, no empty panel (the caption says why), a
    sparse metric drawn as points, and PDF and SVG beside the PNG on request."""
    import matplotlib.pyplot as plt

    from ppo_lab.analysis.action_columns import discrete_shares

    assert discrete_shares(["actions/E", "actions/N", "actions/NE", "actions/invalid_frac"], ["N", "NE", "E"]) == \
        ["actions/N", "actions/NE", "actions/E"]
    run = stamp_format(tmp_path / "run")  # a run dir of this format, made by hand
    lines = ["update,seed,timesteps,wall_s,actions/E,actions/N,train/entropy,train/mean_episode_length,train/vf_loss"]
    lines += [f"{u},0,{64 * u},{u},0.25,0.75,{1 - u / 20},{u * 3 if u % 5 == 0 else ''}," for u in range(1, 11)]
    (run / "metrics.csv").write_text("\n".join(lines) + "\n")
    (run / "summary.json").write_text(json.dumps({"status": "completed", "action_names": ["N", "E"]}))
    shown = []
    real_savefig = plt.Figure.savefig

    def savefig(fig, path, **kw):  # what the figure says, read as it is written
        shown.extend(t.get_text() for ax in fig.axes for t in (ax.yaxis.label, ax.title))
        shown.extend(t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts())
        shown.append(fig._supxlabel.get_text() if fig._supxlabel else "")
        return real_savefig(fig, path, **kw)

    plt.Figure.savefig = savefig
    try:
        assert run_cli(["plots", run, "--format", "pdf,svg"], capsys).returncode == 0
    finally:
        plt.Figure.savefig = real_savefig
    for suffix in ("png", "pdf", "svg"):
        assert (run / f"curves.{suffix}").stat().st_size > 1000
    text = "\n".join(shown)
    assert "policy entropy [nats]" in text and "episode length [steps]" in text and "train/entropy" not in text.split("\n")[0]
    assert "no value in any update, not drawn: train/vf_loss" in text
    assert "sparse, drawn as points: train/mean_episode_length (20% of updates)" in text
    legend = [t for t in shown if t in ("N", "E")]
    assert legend[:2] == ["N", "E"]  # the env's order, not the alphabet's
    assert run_cli(["plots", run, "--format", "eps"], capsys).returncode == 2
