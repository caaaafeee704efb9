"""The run directory layer: every file a run or a sweep leaves, read and written here only.

Imports no jax, so launchers, the sweep callback, start-up code and the analysis may read
run dirs before the hardware settings are applied. One module per file (docs/architecture.md, "Run
directory": contract):

    paths        the file names, the metrics.csv key columns
    atomic       every write: temporary file, fsync, rename
    jsonfile     reading JSON files
    logger_state loggers.json: each optional logger's runs per seed and what each holds
    config_file  config.yaml, config_history.jsonl
    metrics      metrics.csv: the typed reader, the append-only writer, truncation on resume
    evals        evals.csv: evaluations along training, in metrics.csv's layout
    pbt_log      pbt.jsonl: a population's exploit steps
    run_summary  summary.json (`RunSummary`, the typed record), benchmark.json
    error_file   error.txt
    checkpoints  which checkpoints exist, their format and checksums (their pytree (de)serialisation:
                 ppo_lab.run.checkpoint)
    manifest     manifest.json (the reproducibility record); `check_format`, which every
                 command that loads a run dir goes through (run_format: the format it checks)
    stop_file    STOP
    lock         run.lock: one training process per run dir, a dead holder's lock taken over
    jobs         jobs.json (the SLURM meaning of its states: ppo_lab.rundir.slurm_jobs)
    sweep_files  multirun.yaml, .hydra/overrides.yaml, aggregate.csv, runs.csv; the run dirs under a folder
    record       a record: a run dir cut to the small files a docs page is rendered from

The names below are re-exported so that callers write `rundir.read_config(...)`.
"""

from ppo_lab.rundir.atomic import write_atomic, write_failure, write_json_atomic, write_text_atomic
from ppo_lab.rundir.checkpoints import has_checkpoint, latest_checkpoint, list_checkpoints
from ppo_lab.rundir.config_file import (
    append_config_history,
    config_spans,
    load_run_config,
    read_config,
    read_config_history,
    read_experiment,
    validated_config,
    write_config,
)
from ppo_lab.rundir.evals import evals_by_seed, evals_file, evaluated_updates, keep_evals
from ppo_lab.rundir.jobs import read_jobs, write_jobs
from ppo_lab.rundir.jsonfile import read_json
from ppo_lab.rundir.logger_state import read_logger_state, write_logger_state
from ppo_lab.rundir.metrics import (
    MetricsCSV,
    MetricsFileError,
    MetricsTail,
    columns_by_seed,
    copy_rows_until,
    read_header,
    read_metrics,
    read_recent_rows,
    read_seed_rows,
)
from ppo_lab.rundir.pbt_log import append_pbt_step, pbt_log_until, read_pbt_log
from ppo_lab.rundir.paths import (
    AGGREGATE,
    CHECKPOINTS,
    CONFIG,
    CONFIG_HISTORY,
    CRITERIA,
    EVALS,
    KEY_COLUMNS,
    LOGGERS,
    METRICS,
    PBT_LOG,
    MULTIRUN,
    RUNS,
    STOP_FILE,
    SUMMARY,
)
from ppo_lab.rundir.manifest import check_format, dotted_keys, manifest_differences, read_manifest, use_recorded_parts, write_manifest
from ppo_lab.rundir.record import RECORD, is_benchmark_run, recorded_criteria, write_record
from ppo_lab.rundir.stop_file import request_stop, stop_requested
from ppo_lab.rundir.error_file import read_error, write_error
from ppo_lab.rundir.run_summary import (
    RunSummary,
    read_benchmark,
    read_result,
    read_summary,
    write_benchmark,
    write_summary,
)
from ppo_lab.rundir.sweep_files import find_run_dirs, find_sweep_roots, read_multirun, read_overrides, write_table

__all__ = [
    "AGGREGATE", "CHECKPOINTS", "CONFIG", "CONFIG_HISTORY", "CRITERIA", "KEY_COLUMNS", "LOGGERS", "METRICS", "MULTIRUN",
    "RUNS", "STOP_FILE", "SUMMARY", "MetricsCSV", "MetricsFileError", "MetricsTail", "columns_by_seed",
    "copy_rows_until", "find_run_dirs", "find_sweep_roots", "has_checkpoint", "latest_checkpoint",
    "list_checkpoints", "load_run_config", "append_config_history", "config_spans", "read_config_history", "validated_config", "read_benchmark", "read_config", "read_error",
    "read_experiment", "read_header", "read_jobs", "read_json", "read_logger_state", "read_metrics", "read_multirun",
    "read_overrides", "read_recent_rows", "read_result", "read_seed_rows", "read_summary", "request_stop",
    "stop_requested", "write_summary", "RunSummary", "write_atomic", "write_benchmark", "write_config", "write_error",
    "check_format", "dotted_keys", "manifest_differences", "read_manifest", "use_recorded_parts", "write_manifest",
    "write_failure", "write_jobs", "write_json_atomic", "write_logger_state", "write_table", "write_text_atomic",
    "PBT_LOG", "append_pbt_step", "pbt_log_until", "read_pbt_log",
    "EVALS", "evals_by_seed", "evals_file", "evaluated_updates", "keep_evals",
    "RECORD", "is_benchmark_run", "recorded_criteria", "write_record",
]
