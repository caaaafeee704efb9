"""The run directory layer: every file a run or a sweep leaves, read and written here only.

Imports no jax, so launchers, the sweep callback, start-up code and the analysis may read
run dirs before the hardware settings are applied. A module per file, or per kind of file: the
rows of docs/architecture.md under `ppo_lab/rundir/` say which is where; the files' contract is
its "Run directory" section.

The names below are re-exported so that callers write `rundir.read_config(...)`.
"""

from ppo_lab.rundir.atomic import read_json, write_atomic, write_failure, write_json_atomic, write_text_atomic
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
from ppo_lab.rundir.logger_state import read_logger_state, write_logger_state
from ppo_lab.rundir.metrics import (
    MetricsCSV,
    MetricsFileError,
    MetricsTail,
    columns_by_seed,
    copy_rows_until,
    keep_evals,
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
    has_run_files,
)
from ppo_lab.rundir.manifest import check_format, dotted_keys, manifest_differences, read_manifest, use_recorded_parts, write_manifest
from ppo_lab.rundir.record import RECORD, check_recordable, is_benchmark_run, recorded_criteria, write_record
from ppo_lab.rundir.lock import request_stop, stop_requested
from ppo_lab.rundir.run_summary import (
    RunSummary,
    read_benchmark,
    read_error,
    read_result,
    read_summary,
    write_benchmark,
    write_error,
    write_summary,
)
from ppo_lab.rundir.sweep_files import (find_run_dirs, find_sweep_roots, read_jobs, read_multirun, read_overrides, write_jobs,
                                        write_table)

__all__ = [
    "AGGREGATE", "CHECKPOINTS", "CONFIG", "CONFIG_HISTORY", "CRITERIA", "KEY_COLUMNS", "LOGGERS", "METRICS", "MULTIRUN",
    "RUNS", "STOP_FILE", "SUMMARY", "MetricsCSV", "MetricsFileError", "MetricsTail", "columns_by_seed",
    "copy_rows_until", "find_run_dirs", "find_sweep_roots", "has_checkpoint", "has_run_files", "latest_checkpoint",
    "list_checkpoints", "load_run_config", "append_config_history", "config_spans", "read_config_history", "validated_config", "read_benchmark", "read_config", "read_error",
    "read_experiment", "read_header", "read_jobs", "read_json", "read_logger_state", "read_metrics", "read_multirun",
    "read_overrides", "read_recent_rows", "read_result", "read_seed_rows", "read_summary", "request_stop",
    "stop_requested", "write_summary", "RunSummary", "write_atomic", "write_benchmark", "write_config", "write_error",
    "check_format", "dotted_keys", "manifest_differences", "read_manifest", "use_recorded_parts", "write_manifest",
    "write_failure", "write_jobs", "write_json_atomic", "write_logger_state", "write_table", "write_text_atomic",
    "PBT_LOG", "append_pbt_step", "pbt_log_until", "read_pbt_log",
    "EVALS", "keep_evals",
    "RECORD", "check_recordable", "is_benchmark_run", "recorded_criteria", "write_record",
]
