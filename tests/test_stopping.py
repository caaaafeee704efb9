"""The stop signals on the host: what a second Ctrl+C does wherever Python runs its handler."""

from __future__ import annotations

import gc
import signal
import time

import pytest

from ppo_lab.run.stopping import StopSignals


def test_a_second_ctrl_c_met_in_a_gc_callback_is_raised_again_not_dropped(capsys):
    """Python runs a signal's handler at whatever line is running, a garbage-collection
    callback's too (JAX registers one), and drops an exception raised there with a traceback
    on stderr. The second Ctrl+C must still stop the run, and print no traceback."""
    signals, before = StopSignals(), signal.getsignal(signal.SIGINT)

    def collecting(phase, info):  # what the handler does when the second Ctrl+C arrives here
        if phase == "start":
            signals._handle(signal.SIGINT, None)

    with signals.installed():
        signals.received = "SIGINT"  # the first Ctrl+C asked for a clean stop
        gc.callbacks.append(collecting)
        try:
            with pytest.raises(KeyboardInterrupt):
                gc.collect()
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:  # the run's next lines, where it lands
                    pass
        finally:
            gc.callbacks.remove(collecting)
    assert "Traceback" not in capsys.readouterr().err
    assert signal.getsignal(signal.SIGINT) is before  # the run's handlers went with it
