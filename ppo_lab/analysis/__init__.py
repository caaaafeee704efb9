"""Analysis of runs and sweeps: load results, aggregate across seeds, statistics, plots.

``ppo_lab.analysis.stats`` holds the statistics (pure numpy/scipy); its functions are
re-exported here. Other modules of this package are imported by their own names.
"""

from ppo_lab.analysis.stats import (
    SUMMARY_KEYS,
    bonferroni,
    bootstrap_ci,
    cohens_d,
    count_nan,
    iqm,
    summarize,
    welch_t_test,
)

__all__ = [
    "SUMMARY_KEYS",
    "bonferroni",
    "bootstrap_ci",
    "cohens_d",
    "count_nan",
    "iqm",
    "summarize",
    "welch_t_test",
]
