"""How a failed run says so: its error in one line on the console, the full traceback only in
the run's log files (Hydra's job log, `launch.log` in the run dir), where a developer looks."""

from __future__ import annotations

import logging
import traceback

from ppo_lab import rundir

log = logging.getLogger(__name__)


def one_line(exc: BaseException) -> str:
    """`exc` as summary.json's `error` and the console say it: a failed write as `OSError
    ENOSPC writing PATH: No space left on device`, anything else as Python's last line."""
    return rundir.write_failure(exc) or "".join(traceback.format_exception_only(exc)).strip()


def _log_files() -> list[logging.FileHandler]:
    handlers, logger = [], log
    while logger is not None:  # this logger's and its ancestors' handlers, as a record would reach them
        handlers += [h for h in logger.handlers if isinstance(h, logging.FileHandler)]
        logger = logger.parent if logger.propagate else None
    return handlers


def traceback_to_log_files(message: str, exc: BaseException) -> None:
    """`message` with `exc`'s traceback, written to the log files alone (no console handler)."""
    record = log.makeRecord(log.name, logging.ERROR, __file__, 0, message, None,
                            (type(exc), exc, exc.__traceback__))
    for handler in _log_files():
        if record.levelno >= handler.level:
            handler.handle(record)


def report(message: str, exc: BaseException) -> None:
    """One warning line on the console and in the log (`message: <one line>`), the traceback in
    the log files only."""
    log.warning("%s: %s", message, one_line(exc))
    traceback_to_log_files(f"{message}: traceback", exc)
