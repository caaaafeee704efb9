"""The error types users see: bad configuration, a run dir of a format this lab does not read,
and a sweep stopped by a signal."""


class ConfigError(ValueError):
    """A config value is invalid. The message names the key, the value and what is valid.

    Raised before anything is compiled or written, so a bad command line costs seconds
    and leaves nothing behind that could be mistaken for a result.
    """

    def __init__(self, key: str, value, valid: str):
        self.key, self.value, self.valid = key, value, valid
        super().__init__(f"invalid config: {key}={value!r}; expected {valid}")

    def __reduce__(self):
        # Picklable with its fields: submitit sends a job's exception back to the launcher.
        return type(self), (self.key, self.value, self.valid)


class RunDirFormatError(RuntimeError):
    """A run dir (or a checkpoint) of a format this lab does not read (ppo_lab/rundir/run_format.py).
    Its message is one line naming the format, the lab that wrote it and what to do; raised
    before anything is compiled or written: launch.py and `ppo-lab` print it and exit 2."""


class SweepStopped(BaseException):
    """A signal (Ctrl+C, SIGTERM) stopped a job of a sweep this process runs one job after
    another (Hydra's basic launcher, `hydra/launcher=vmap`): the sweep stops with it, and the
    same command (or `ppo-lab resume SWEEP_DIR`) goes on, its completed jobs skipped. A
    BaseException, because Hydra's launchers take an Exception as that job's failure and start
    the next job, as a signal must not."""

    @classmethod
    def after(cls, summary) -> None:
        """Raised when `summary` (a RunSummary) ended on a signal."""
        if summary.status == "stopped" and (summary.stop_reason or "").startswith("signal "):
            raise cls(f"the sweep stopped with its job ({summary.stop_reason}); its later jobs were not started")
