"""MLflow recorder: one MLflow run per seed under a parent run for the job, and a model registry.

    python launch.py logger=[csv,mlflow]                            # store: outputs/mlflow/mlflow.db
    python launch.py logger=[csv,mlflow] train.target_return=475    # + a registered model once converged
    python launch.py logger=[csv,mlflow] logger.mlflow.tracking_uri=http://host:5000
    mlflow ui --backend-store-uri sqlite:///outputs/mlflow/mlflow.db

- Store: by default a SQLite file `<logger.mlflow.dir>/mlflow.db` (the model registry needs a
  database-backed store; a file store has none) with artifacts beside it in `artifacts/`; any
  tracking URI by `logger.mlflow.tracking_uri`, the registry at the same URI. Nothing needs a
  server; MLflow's usage telemetry is off unless the user turned it on.
- Runs: the MLflow experiment is `logger.mlflow.experiment_name` (default: the lab's
  `experiment`); the job is a parent run, each vmapped seed a child run (`mlflow.parentRunId`),
  tagged `ppo_lab.experiment`, `ppo_lab.sweep` (the Hydra sweep dir, as the W&B logger groups),
  `ppo_lab.run_dir`, `ppo_lab.reward`, `ppo_lab.seed` (a population's member also
  `ppo_lab.member`, and at the end `ppo_lab.pbt_best_member`: true|false). Params: the
  resolved config flattened (`ppo.lr`, ...; a seed run's `seed` is its own seed).
- Metrics: every metric of every update with `step=update` (the metric names of
  docs/architecture.md, "Contracts", plus `timesteps` and `wall_s`), logged synchronously; at
  the end `eval/*` and `final/*` per seed (their mean on the parent run).
- Artifacts: `config.yaml`, `summary.json` and the plot panel `curves.png` on every run; the
  final checkpoint (`checkpoint/ckpt_<update>.*`) on the parent.
- Registry: when a seed converged (the run stopped on `train.target_return`, or that seed's
  windowed return reached it, or `logger.mlflow.register_if` holds for its evaluation) its
  policy is registered as `logger.mlflow.model_name` (default `ppo_lab-<experiment>`): a pyfunc
  that maps observations to greedy actions (`mlflow_policy.py`), its evaluation as tags.
- An unreachable store: checked before compiling (`reachability.py`, `connect_timeout_s`,
  `on_unreachable`); over HTTP every request is then bounded by `connect_timeout_s` without
  MLflow's own retries (minutes per request), so a store that goes away mid-run costs one
  timeout and that logger is disabled (recorders/__init__.py). MLFLOW_HTTP_REQUEST_TIMEOUT /
  MLFLOW_HTTP_REQUEST_MAX_RETRIES set in the environment before the run win.
- Resume (per_seed.py): the run ids live in the run dir's loggers.json; a resumed run continues
  the same MLflow runs. Each update is logged once: the last step MLflow holds is read back from
  it and earlier updates are skipped; updates metrics.csv holds but MLflow does not (the logger
  was added on a relaunch) are logged from metrics.csv first.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import tempfile
import time
from pathlib import Path

from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException

from ppo_lab import rundir
from ppo_lab.judging.objective import ObjectiveError, seed_values
from ppo_lab.analysis.run_plots import plot_run
from ppo_lab.errors import ConfigError
from ppo_lab.estimators import finite_number
from ppo_lab.run.recorders.per_seed import (
    PerSeedLogger,
    is_best_member,
    population_member,
    row_metrics,
    seed_results,
    sweep_group,
)
from ppo_lab.run.recorders.mlflow_policy import save_policy_model, seed_params_from_checkpoint
from ppo_lab.run.recorders.reachability import DEFAULT_ON_UNREACHABLE, DEFAULT_TIMEOUT_S, store_policy
from ppo_lab.rundir.checkpoints import state_path
from ppo_lab.rundir.run_summary import RunSummary

log = logging.getLogger(__name__)
# MLflow 3's UI opens an experiment by this tag: untagged ones open in the GenAI view (traces,
# prompts), where a training run's metrics are a click away. "custom_model_development" is the
# UI's "Model training" (mlflow/server/js: ExperimentKind.CUSTOM_MODEL_DEVELOPMENT).
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
MODEL_TRAINING = "custom_model_development"

DEFAULTS = {
    "dir": "outputs/mlflow", "tracking_uri": None, "experiment_name": None, "tags": None,
    "artifacts": True, "register": True, "model_name": None,
    "register_if": {"metric": None, "threshold": None, "direction": "maximize"},
    "connect_timeout_s": DEFAULT_TIMEOUT_S, "on_unreachable": DEFAULT_ON_UNREACHABLE,
}
# MLflow's HTTP settings as the user's environment had them before any run of this process.
_USER_HTTP_ENV = {var: os.environ.get(var) for var in ("MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES")}
END_STATUS = {"completed": "FINISHED", "timed_out": "FINISHED", "failed": "FAILED", "stopped": "KILLED"}
MAX_BATCH = 1000  # MLflow's limit of metrics per log_batch call
MAX_PARAMS = 100  # ... and of params
MAX_PARAM_CHARS = 6000


def check_options(options: dict | None) -> dict:
    opts = {**DEFAULTS, **(options or {})}
    unknown = sorted(set(opts) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f"logger.mlflow.{unknown[0]}", opts[unknown[0]], f"one of {sorted(DEFAULTS)}")
    rule = {**DEFAULTS["register_if"], **(opts["register_if"] or {})}
    if rule["direction"] not in ("maximize", "minimize"):
        raise ConfigError("logger.mlflow.register_if.direction", rule["direction"], "maximize or minimize")
    if (rule["metric"] is None) != (rule["threshold"] is None):
        raise ConfigError("logger.mlflow.register_if", dict(rule), "both metric and threshold, or neither")
    if rule["threshold"] is not None and not finite_number(rule["threshold"]):
        raise ConfigError("logger.mlflow.register_if.threshold", rule["threshold"], "a number")
    if opts["tags"] is not None and not isinstance(opts["tags"], dict):
        raise ConfigError("logger.mlflow.tags", opts["tags"], "null or a mapping of tag -> value")
    store_policy("mlflow", opts)
    return {**opts, "register_if": rule}


def bound_http_requests(uri: str, timeout_s: float) -> None:
    """Over HTTP(S): each MLflow request gives up after `timeout_s` (whole seconds, MLflow
    reads an int), without MLflow's retries; the user's own environment settings win."""
    if not uri.lower().startswith(("http://", "https://")):
        return
    wanted = {"MLFLOW_HTTP_REQUEST_TIMEOUT": str(max(1, math.ceil(timeout_s))), "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"}
    for var, value in wanted.items():
        if _USER_HTTP_ENV[var] is None:
            os.environ[var] = value


def store_location(opts: dict) -> tuple[str, Path | None]:
    """(tracking URI, local artifact root or None for a remote store that decides)."""
    uri = opts["tracking_uri"]
    if uri:
        local = uri[len("sqlite:///"):] if uri.startswith("sqlite:///") else None
        return uri, (Path(local).resolve().parent / "artifacts") if local else None
    store = Path(opts["dir"]).resolve()
    store.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{store / 'mlflow.db'}", store / "artifacts"


def as_params(resolved: dict) -> dict[str, str]:
    """A resolved config as MLflow params: dotted keys, values as text."""
    return {name: (value if isinstance(value, str) else json.dumps(value))[:MAX_PARAM_CHARS]
            for name, value in rundir.dotted_keys(resolved).items()}


def convergence(summary: RunSummary, index: int, target: float | None, rule: dict) -> str | None:
    """Why seed number `index` of this run counts as converged (None: it does not)."""
    if summary.status not in ("completed", "timed_out"):
        return None
    reason = summary.stop_reason or ""
    if target is not None:
        if reason.startswith("train.target_return="):
            return f"early stopping: {reason}"
        final = summary.final.get("train/mean_episode_return") or []
        if index < len(final) and finite_number(final[index]) and final[index] >= target:
            return f"train/mean_episode_return {final[index]:.2f} >= train.target_return={target:g}"
    if rule["metric"] is not None:
        try:
            value = seed_values(summary, rule["metric"])[index]
        except (ObjectiveError, IndexError):
            return None
        better = value >= rule["threshold"] if rule["direction"] == "maximize" else value <= rule["threshold"]
        if finite_number(value) and better:
            return f"{rule['metric']} {value:g} {'>=' if rule['direction'] == 'maximize' else '<='} {rule['threshold']:g}"
    return None


class MlflowRecorder(PerSeedLogger):
    name = "mlflow"

    def __init__(self, run_dir: Path, cfg, options: dict):
        self.opts = check_options(options)
        super().__init__(run_dir, cfg)
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # offline-safe: no usage pings
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # no bars in job logs

        self.uri, artifact_root = store_location(self.opts)
        bound_http_requests(self.uri, float(self.opts["connect_timeout_s"]))
        self.client = MlflowClient(tracking_uri=self.uri, registry_uri=self.uri)
        name = self.opts["experiment_name"] or cfg.experiment
        self.experiment_id = self._experiment(name, artifact_root)
        if self.state and self.state.get("tracking_uri") != self.uri:
            log.warning("this run logged to MLflow at %s before; now %s: starting new MLflow runs",
                        self.state.get("tracking_uri"), self.uri)
            self.state = {}
        tags = self._tags()
        params = as_params(cfg.resolved)
        self.parent = self._open_run(self.state.get("parent"), f"{cfg.experiment}-{self.run_dir.name}", tags, params)
        self.run_ids: dict[int, str] = {}
        for seed in self.seeds:
            seed_tags = {**tags, "mlflow.parentRunId": self.parent, "ppo_lab.seed": str(seed)}
            if population_member(cfg, seed) is not None:  # a population's member (docs/pbt.md)
                seed_tags["ppo_lab.member"] = str(population_member(cfg, seed))
            seed_params = {**params, "seed": str(seed), "first_seed": str(cfg.seed)}
            run_name = f"{cfg.experiment}-{self.run_dir.name}-seed{seed}"
            self.run_ids[seed] = self._open_run(self.state.get("runs", {}).get(str(seed)), run_name, seed_tags, seed_params)
        self.state = {"tracking_uri": self.uri, "experiment_id": self.experiment_id, "parent": self.parent,
                      "runs": {str(s): r for s, r in self.run_ids.items()}}
        self.track()
        log.info("MLflow: experiment %r (%s), parent run %s, %d seed run(s)", name, self.uri, self.parent, len(self.run_ids))

    # -- store, runs, state ------------------------------------------------------------------
    def _experiment(self, name: str, artifact_root: Path | None) -> str:
        for attempt in range(3):  # jobs starting together may race to create the store or the experiment
            try:
                exp = self.client.get_experiment_by_name(name)
                if exp is not None:
                    if exp.lifecycle_stage == "deleted":
                        self.client.restore_experiment(exp.experiment_id)
                    if EXPERIMENT_KIND_TAG not in exp.tags:  # made by an older lab; a user's own choice is kept
                        self.client.set_experiment_tag(exp.experiment_id, EXPERIMENT_KIND_TAG, MODEL_TRAINING)
                    return exp.experiment_id
                location = (artifact_root / re.sub(r"[^\w.-]+", "_", name)).as_uri() if artifact_root else None
                return self.client.create_experiment(name, artifact_location=location,
                                                     tags={EXPERIMENT_KIND_TAG: MODEL_TRAINING})
            except Exception as exc:  # noqa: BLE001 - e.g. two processes creating the tables at once
                if attempt == 2:
                    raise
                log.warning("MLflow store %s not ready (%s); retrying", self.uri, exc)
                time.sleep(1 + attempt)
        raise AssertionError("unreachable")

    def _tags(self) -> dict[str, str]:
        tags = {"ppo_lab.experiment": str(self.cfg.experiment), "ppo_lab.run_dir": str(self.run_dir.resolve()),
                "ppo_lab.reward": str(self.cfg.reward.name), "ppo_lab.env": str(self.cfg.env.name)}
        sweep = sweep_group()
        if sweep:
            tags["ppo_lab.sweep"] = sweep
        tags.update({str(k): str(v) for k, v in (self.opts["tags"] or {}).items()})
        return tags

    def _open_run(self, run_id: str | None, run_name: str, tags: dict, params: dict) -> str:
        """Continue run `run_id` when this store has it (a resume), else start a new one."""
        run = None
        if run_id:
            try:
                run = self.client.get_run(run_id)
            except MlflowException:
                log.warning("MLflow run %s is not in %s: starting a new run", run_id, self.uri)
        if run is None:
            run = self.client.create_run(self.experiment_id, run_name=run_name, tags=tags)
        else:
            self.client.update_run(run.info.run_id, status="RUNNING")
        held = run.data.params
        changed = sorted(k for k, v in params.items() if k in held and held[k] != v)
        if changed:  # MLflow params are write-once; the run dir's config history has the change
            log.warning("MLflow run %s keeps its earlier params for %s", run.info.run_id, ", ".join(changed[:10]))
        new = [Param(k, v) for k, v in params.items() if k not in held]
        for i in range(0, len(new), MAX_PARAMS):
            self.client.log_batch(run.info.run_id, params=new[i:i + MAX_PARAMS])
        self.client.log_batch(run.info.run_id, tags=[RunTag(k, v) for k, v in tags.items()])
        return run.info.run_id

    # -- metrics ----------------------------------------------------------------------------
    def store_holds(self, seed: int) -> int:
        """MLflow's own record of the run, not what an earlier session meant to send."""
        return max((int(m.step) for m in self.client.get_metric_history(self.run_ids[seed], "timesteps")), default=0)

    def write(self, seed: int, rows: list[dict]) -> None:
        now = int(time.time() * 1000)
        metrics = [Metric(k, v, now, int(row["update"])) for row in rows for k, v in row_metrics(row).items()]
        for i in range(0, len(metrics), MAX_BATCH):
            self.client.log_batch(self.run_ids[seed], metrics=metrics[i:i + MAX_BATCH])

    # -- the end ----------------------------------------------------------------------------
    def finish(self, summary: RunSummary) -> None:
        seeds = [int(s) for s in summary.seeds or self.run_ids]
        step = int(summary.updates or max(self.held.values(), default=0))
        now = int(time.time() * 1000)
        status = summary.status
        end_tags = [RunTag("ppo_lab.status", status), RunTag("ppo_lab.stop_reason", str(summary.stop_reason))]
        means: dict[str, list[float]] = {}
        with tempfile.TemporaryDirectory() as tmp:
            files = self._artifact_files(Path(tmp)) if self.opts["artifacts"] else []
            for index, seed in enumerate(seeds):
                run_id = self.run_ids.get(seed)
                if run_id is None:
                    continue
                results = seed_results(summary, index)
                metrics = [Metric(name, value, now, step) for name, value in results.items()]
                for name, value in results.items():
                    means.setdefault(name, []).append(value)
                best = is_best_member(self.cfg, summary, seed)
                member_tags = [] if best is None else [RunTag("ppo_lab.pbt_best_member", str(best).lower())]
                self.client.log_batch(run_id, metrics=metrics, tags=end_tags + member_tags)
                for path in files:
                    self.client.log_artifact(run_id, str(path))
                self._maybe_register(summary, index, seed, run_id)
                self.client.set_terminated(run_id, END_STATUS.get(status, "FAILED"))
            parent_metrics = [Metric(k, sum(v) / len(v), now, step) for k, v in means.items()]
            self.client.log_batch(self.parent, metrics=parent_metrics, tags=end_tags)
            for path in files:
                self.client.log_artifact(self.parent, str(path))
            if self.opts["artifacts"]:
                self._log_checkpoint()
        self.client.set_terminated(self.parent, END_STATUS.get(status, "FAILED"))

    def _artifact_files(self, tmp: Path) -> list[Path]:
        files = [self.run_dir / name for name in (rundir.CONFIG, rundir.SUMMARY) if (self.run_dir / name).exists()]
        if (self.run_dir / rundir.METRICS).exists():
            try:
                files.append(plot_run(self.run_dir, out=tmp / "curves.png"))
            except Exception:  # noqa: BLE001 - a plot must never cost the run's record
                log.exception("could not draw the plot panel of %s for MLflow", self.run_dir)
        return files

    def _log_checkpoint(self) -> None:
        meta = rundir.latest_checkpoint(self.run_dir / rundir.CHECKPOINTS)
        if meta is not None:
            for path in (state_path(meta), meta):
                self.client.log_artifact(self.parent, str(path), "checkpoint")

    def _maybe_register(self, summary: RunSummary, index: int, seed: int, run_id: str) -> None:
        if not self.opts["register"]:
            return
        reason = convergence(summary, index, self.cfg.train.target_return, self.opts["register_if"])
        if reason is None:
            return
        run = self.client.get_run(run_id)
        if "ppo_lab.registered_model" in run.data.tags:  # a relaunch of a finished run: once is enough
            return
        try:
            version = self._register(summary, index, seed, run, reason)
        except Exception as exc:  # noqa: BLE001 - the run's own record must still be closed
            log.exception("could not register the policy of seed %d", seed)
            self.client.set_tag(run_id, "ppo_lab.register_error", f"{type(exc).__name__}: {exc}"[:5000])
            return
        log.info("registered seed %d's policy as MLflow model %s version %s (%s)", seed, version.name, version.version, reason)

    def _register(self, summary: RunSummary, index: int, seed: int, run, reason: str):
        meta = rundir.latest_checkpoint(self.run_dir / rundir.CHECKPOINTS)
        if meta is None:
            raise FileNotFoundError(f"no complete checkpoint in {self.run_dir / rundir.CHECKPOINTS}")
        replica = index if summary.layout.get("mode", "seeds") == "seeds" else 0
        name = self.opts["model_name"] or f"ppo_lab-{self.cfg.experiment}"
        tags = {"seed": str(seed), "run_dir": str(self.run_dir.resolve()), "experiment": str(self.cfg.experiment),
                "env": str(self.cfg.env.name), "updates": str(summary.updates),
                "timesteps": str(summary.timesteps), "checkpoint": meta.stem, "converged": reason,
                "stop_reason": str(summary.stop_reason)}
        for section, values in summary.per_seed().items():
            for metric, per_seed in values.items():
                if index < len(per_seed) and per_seed[index] is not None:
                    tags[f"{section}/{metric}"] = f"{per_seed[index]:.6g}"
        with tempfile.TemporaryDirectory() as tmp:
            params = Path(tmp) / "params.msgpack"
            params.write_bytes(seed_params_from_checkpoint(state_path(meta), replica))
            save_policy_model(Path(tmp) / "policy", self.run_dir / rundir.CONFIG, params, {"seed": seed, "converged": reason})
            self.client.log_artifacts(run.info.run_id, str(Path(tmp) / "policy"), "policy")
        try:
            self.client.create_registered_model(name, description="ppo_lab policies: observations -> greedy actions")
        except MlflowException:  # it exists (RESOURCE_ALREADY_EXISTS)
            pass
        version = self.client.create_model_version(
            name, f"{run.info.artifact_uri}/policy", run_id=run.info.run_id, tags=tags,
            description=f"seed {seed} of {self.run_dir}: {reason}",
        )
        self.client.set_tag(run.info.run_id, "ppo_lab.registered_model", f"{name}/{version.version}")
        return version


def make_logger(run_dir: Path, cfg, options: dict) -> MlflowRecorder:
    return MlflowRecorder(run_dir, cfg, options)
