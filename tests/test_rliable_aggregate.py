"""`ppo-lab aggregate` with rliable's statistics and honest small samples, on sweeps written by
hand through the run-dir contract (test_aggregate.make_sweep): the statistics, not training."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from scipy import stats

from ppo_lab.analysis.aggregate import format_table, run_aggregate
from test_aggregate import make_sweep, read_csv

ENVS = {"CartPole-v1": (22.0, 475.0), "Acrobot-v1": (-500.0, -100.0)}


def two_env_sweep(path, seeds=5):
    jobs = [[f"env.gymnax_id={e}", f"seed={s}"] for e in ENVS for s in range(seeds)]
    sweep = make_sweep(path, jobs, task_overrides=[f"env.gymnax_id={','.join(ENVS)}", f"seed=0-{seeds}"])
    rng = np.random.default_rng(0)
    for num, overrides in enumerate(jobs):
        env_id = overrides[0].split("=")[1]
        low, high = ENVS[env_id]
        run = sweep / str(num)
        summary = json.loads((run / "summary.json").read_text())
        summary["eval"]["episode_return"] = [float(rng.uniform(low, high))]
        summary["eval"]["episode_length"] = [float(rng.uniform(20, 500))]
        (run / "summary.json").write_text(json.dumps(summary))
        env = {"name": "gymnax", "gymnax_id": env_id, "scores": {k: {"random": v[0], "reference": v[1]} for k, v in ENVS.items()}}
        (run / "config.yaml").write_text(yaml.safe_dump({"experiment": "toy", "seed": num % seeds, "num_seeds": 1, "env": env}))
    return sweep


def test_two_envs_eight_seeds_rliable_json(tmp_path):
    sweep = two_env_sweep(tmp_path / "sw", seeds=8)
    out = run_aggregate([sweep], quiet=True, reps=500)
    report = json.loads((sweep / "rliable.json").read_text())
    assert (sweep / "rliable.png").stat().st_size > 1000
    assert report["normalized"] and report["bootstrap"] == {"method": report["bootstrap"]["method"], "reps": 500, "seed": 0, "min_runs": 8}
    assert list(report["configs"]) == ["all"]  # the env is the task, not the configuration
    config = report["configs"]["all"]
    assert config["n_runs"] == {"CartPole-v1": 8, "Acrobot-v1": 8} and not config["small_sample"]
    assert set(config["aggregates"]) == {"iqm", "median", "mean", "optimality_gap"}
    for est in config["aggregates"].values():
        assert est["ci_low"] <= est["point"] <= est["ci_high"]
    raw = {t: [] for t in ENVS}
    for u in out["collection"].units:
        raw[u.run.overrides["env.gymnax_id"]].append(u.values["eval/episode_return"])
    normalised = np.concatenate([(np.array(v) - ENVS[t][0]) / (ENVS[t][1] - ENVS[t][0]) for t, v in raw.items()])
    assert config["aggregates"]["iqm"]["point"] == pytest.approx(stats.trim_mean(normalised, 0.25))
    profile = report["profiles"]["all"]
    assert all(lo <= p <= hi for lo, p, hi in zip(profile["low"], profile["profile"], profile["high"]))
    assert not report["warnings"]


def test_two_seeds_warned_and_bounded_intervals_stay_in_bounds(tmp_path):
    sweep = two_env_sweep(tmp_path / "sw", seeds=2)
    for run in sweep.iterdir():  # the env declares its episode lengths' bounds
        if (run / "config.yaml").exists():
            cfg = yaml.safe_load((run / "config.yaml").read_text())
            cfg["env"]["metrics"] = {"bounds": {"episode_length": [0, 500]}}
            (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    out = run_aggregate([sweep], quiet=True, reps=200)
    rows = read_csv(sweep / "aggregate.csv")
    length = [r for r in rows if r["metric"] == "eval/episode_length"]
    assert length and all(r["ci_method"] == "anderson" and r["small_sample"] == "True" for r in length)
    for r in length:
        assert 0 <= float(r["ci_low"]) <= float(r["mean"]) <= float(r["ci_high"]) <= 500
    returns = [r for r in rows if r["metric"] == "eval/episode_return"]  # no bounds declared: Student t
    assert returns and all(r["ci_method"] == "t" and r["iqm_ci_low"] == "" for r in returns)
    table = format_table(out["rows"], out["collection"])
    assert "WARNING: env.gymnax_id=CartPole-v1: n=2 seed(s), fewer than 5" in table and "none (n<8)" in table
    report = json.loads((sweep / "rliable.json").read_text())
    assert report["configs"]["all"]["small_sample"] and any("n=2" in w for w in report["warnings"])
    assert all(np.isnan(e["ci_low"]) for e in report["configs"]["all"]["aggregates"].values())


def test_raw_scores_without_references_leave_out_the_optimality_gap(tmp_path):
    sweep = two_env_sweep(tmp_path / "sw", seeds=2)
    for run in sweep.iterdir():
        if (run / "config.yaml").exists():
            cfg = yaml.safe_load((run / "config.yaml").read_text())
            cfg["env"].pop("scores")
            (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    run_aggregate([sweep], quiet=True, reps=100, plot=False, score_refs={"CartPole-v1": (0.0, 500.0)})
    report = json.loads((sweep / "rliable.json").read_text())
    assert not report["normalized"] and "optimality_gap" not in report["configs"]["all"]["aggregates"]
    assert report["tasks"]["CartPole-v1"]["source"] == "command line" and report["tasks"]["Acrobot-v1"] is None


def test_compare_gives_the_probability_of_improvement(tmp_path, capsys):
    from ppo_lab.analysis import compare

    a = two_env_sweep(tmp_path / "a", seeds=2)
    b = two_env_sweep(tmp_path / "b", seeds=2)
    for run in b.iterdir():  # B: every return lower than A's worst on its task
        if (run / "summary.json").exists():
            summary = json.loads((run / "summary.json").read_text())
            summary["eval"]["episode_return"] = [-1000.0]
            (run / "summary.json").write_text(json.dumps(summary))
    assert compare.main([str(a), str(b), "--out", str(tmp_path / "c.png")]) == 0
    text = capsys.readouterr().out
    assert "P(a > b) on eval/episode_return = 1.000 [no interval: n<8]" in text
    assert "WARNING: n=2 run(s) on a side" in text
    # beside it, the difference of the means with its interval, Welch's p, Cohen's d and n
    line = next(line for line in text.splitlines() if line.startswith("a - b on eval/episode_return: "))
    assert "(95%, Welch); Welch's t-test p = " in line and "Cohen's d = " in line and line.endswith("n = 4 vs 4 seeds pooled over 2 envs (P(A > B) compares within each)")
    # a metric no input has is refused, naming the closest and the valid ones
    assert compare.main([str(a), str(b), "--out", str(tmp_path / "d.png"), "--metric", "eval/episode_retrun"]) == 2
    err = capsys.readouterr().err
    assert "did you mean eval/episode_return?" in err and "eval/episode_length" in err and not (tmp_path / "d.png").exists()


def test_two_configurations_get_the_probability_of_improvement(tmp_path):
    jobs = [[f"ppo.lr={lr}", f"seed={s}"] for lr in ("0.001", "0.002") for s in range(3)]
    sweep = make_sweep(tmp_path / "sw", jobs, task_overrides=["ppo.lr=0.001,0.002", "seed=0,1,2"],
                       group_of=lambda ov: 0 if ov[0].endswith("0.001") else 5)
    report = run_aggregate([sweep], quiet=True, reps=100, plot=False)["rliable"]
    assert list(report["configs"]) == ["ppo.lr=0.001", "ppo.lr=0.002"] and not report["normalized"]
    # every 0.002 seed scores above every 0.001 seed (make_sweep's values)
    assert report["improvement"]["ppo.lr=0.002 > ppo.lr=0.001"]["point"] == 1.0
    assert report["improvement"]["ppo.lr=0.001 > ppo.lr=0.002"]["point"] == 0.0


def reward_mode_sweep(path, seeds=2):
    """A sweep over two reward modes of an env that declares its headline metric: the proxy
    mode is paid more (its return) and is worse on the true objective; its training return is
    logged in one update of four (an agent that rarely ends an episode)."""
    modes = {"ground_truth": {"food": 1.0, "poison": -2.0}, "proxy": {"food": 1.0, "poison": 0.5}}
    jobs = [[f"reward={m}", f"seed={s}"] for m in modes for s in range(seeds)]
    sweep = make_sweep(path, jobs, task_overrides=[f"reward={','.join(modes)}", f"seed=0-{seeds}"])
    env = {"name": "world", "metrics": {"headline": "true/objective_per_1k"}}
    for num, (mode, _) in enumerate(jobs):
        mode = mode.split("=")[1]
        run, proxy = sweep / str(num), mode == "proxy"
        summary = json.loads((run / "summary.json").read_text())
        summary["eval"]["episode_return"] = [200.0 + num if proxy else 130.0 + num]
        summary["final"]["true/objective_per_1k"] = [-20.0 - num if proxy else 5.0 + num]
        (run / "summary.json").write_text(json.dumps(summary))
        (run / "config.yaml").write_text(yaml.safe_dump({"experiment": "toy", "seed": num % seeds, "env": env,
                                                         "reward": {"name": mode, **modes[mode]}}))
        lines = ["update,seed,timesteps,wall_s,train/mean_episode_return,true/objective_per_1k"]
        for u in range(1, 9):
            paid = (10.0 * u if u % 4 == 0 else "") if proxy else 5.0 * u
            lines.append(f"{u},{num % seeds},{64 * u},{0.1 * u},{paid},{-u if proxy else u}")
        (run / "metrics.csv").write_text("\n".join(lines) + "\n")
    return sweep


def test_returns_paid_under_different_reward_modes_are_never_ranked(tmp_path, capsys):
    sweep = reward_mode_sweep(tmp_path / "sw")
    out = run_aggregate([sweep], reps=100, curve_metrics=["train/mean_episode_return", "true/objective_per_1k"],
                        formats=("pdf", "svg"))
    text = capsys.readouterr().out
    report = json.loads((sweep / "rliable.json").read_text())
    # ranked on the headline (the true objective), where ground_truth wins, never on the return
    assert report["metric"] == "true/objective_per_1k"
    assert report["improvement"]["reward=ground_truth > reward=proxy"]["point"] == 1.0
    assert "eval/episode_return: paid reward (proxy)" in text and "eval/episode_return: paid reward (ground_truth)" in text
    # the return, asked for by name, is refused with the reason, and the headline used instead
    refused = run_aggregate([sweep], out_dir=tmp_path / "r", quiet=True, reps=100, plot=False,
                            rliable_metric="eval/episode_return")["rliable"]
    assert refused["metric"] == "true/objective_per_1k"
    assert "not comparable across modes" in refused["warnings"][0] and "ground_truth, proxy" in refused["warnings"][0]
    # curves: one panel per mode for the paid return; the sparse proxy return drawn where it exists
    notes = out["notes"]["curves.png"]
    assert any("one panel per reward mode" in n for n in notes)
    assert any(n.startswith("train/mean_episode_return, reward=proxy: sparse (a value in 25% of the updates)") for n in notes)
    row = next(r for r in read_csv(sweep / "aggregate.csv")
               if r["metric"] == "train/mean_episode_return" and r["group"] == "reward=proxy")
    assert float(row["logged_frac"]) == 0.25 and "sparse: in 25% of updates" in text
    for suffix in ("png", "pdf", "svg"):  # --format pdf,svg: beside the PNG
        assert (sweep / f"curves.{suffix}").stat().st_size > 1000 and (sweep / f"rliable.{suffix}").stat().st_size > 1000


def test_compare_labels_runs_by_their_mode_and_compares_the_headline(tmp_path, capsys):
    import shutil

    from ppo_lab.analysis import compare
    from ppo_lab.judging.closing import _spec

    sweep = reward_mode_sweep(tmp_path / "sw")
    for folder, jobs in (("gt", (0, 1)), ("px", (2, 3))):  # each mode's two seeds in a folder
        for job in jobs:
            shutil.copytree(sweep / str(job), tmp_path / folder / str(job))
    a, b, png = str(tmp_path / "gt"), str(tmp_path / "px"), str(tmp_path / "c.png")
    assert compare.main([a, b, "--out", png]) == 0
    text = capsys.readouterr().out
    assert "P(reward=ground_truth > reward=proxy) on true/objective_per_1k = 1.000" in text
    # the headline with aggregate's interval for the same seeds; the return beside it, with its mode
    row = next(r for r in run_aggregate([tmp_path / "gt"], out_dir=tmp_path / "agg", quiet=True, plot=False)["rows"]
               if r["metric"] == "true/objective_per_1k")
    spec = _spec(row["mean"], row["ci_low"], row["ci_high"])
    line = next(line for line in text.splitlines() if line.startswith("reward=ground_truth "))
    assert f"{format(row['mean'], spec)} [{format(row['ci_low'], spec)}, {format(row['ci_high'], spec)}]" in line
    assert "ground_truth: 130.5 [124.1, 136.9] (Student t)" in line and "true objective per 1k steps (mean [95% CI])" in text
    # the return, asked for by name, is not ranked across modes
    assert compare.main([a, b, "--out", png, "--metric", "eval/episode_return"]) == 0
    out = capsys.readouterr()
    assert "P(" not in out.out and "not comparable across modes" in out.err
