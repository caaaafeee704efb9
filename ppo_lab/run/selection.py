"""How a population's members rank: by fitness in the experimenter's direction, under bounds.

    window_mean(values)                 a member's mean of one metric over a window (NaN updates,
                                        where no episode ended, left out; NaN if none is finite)
    violation(value, bound)             how far a value lies outside its bound, scaled by the bound
    Standing(fitness, values, ...)      the members' fitness and constrained metrics at one step:
        .feasible                       per member: meets every bound
        .worst_first() / .best()        the ranking, diverged members last
        .tied(a, b)                     two members stand equal (fitness within TIE_TOLERANCE)

A member that meets every bound ranks above every member that does not; among those that do,
the better fitness ranks higher (`fitness_mode`: max or min); among those that do not, the
smaller total violation, then the better fitness. A bound's violation is scaled by its own
magnitude, (min - value) / |min| or (value - max) / |max|, so that bounds of different units
add up (a bound at 0 counts its violation in the metric's own units). A constrained metric with
no finite value in the window is not met (nothing shows that it is), its violation infinite. A
diverged member ranks below every other, whatever its values.

Ties keep the members' order: in `worst_first` the lower index ranks lower, in `best` the lower
index wins (the population's exploit and its closing summary, as before bounds existed).
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from ppo_lab.config import Bound

# Members whose fitness differs by no more than this (relative) tie: none copies the other. A
# solved task's members all score its maximum (CartPole's 500) and differ by float rounding only.
TIE_TOLERANCE = 1e-6

def window_mean(values: Sequence[float]) -> float:
    """Mean of the finite values (NaN where there is none)."""
    finite = [v for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else math.nan


def violation(value: float, bound: Bound) -> float:
    """0 within the bound; else the distance past it over the bound's magnitude (inf for NaN)."""
    if not math.isfinite(value):
        return math.inf
    excess = 0.0
    if bound.min is not None and value < bound.min:
        excess += (bound.min - value) / (abs(bound.min) or 1.0)
    if bound.max is not None and value > bound.max:
        excess += (value - bound.max) / (abs(bound.max) or 1.0)
    return excess


class Standing:
    """The members at one step: `fitness` (per member, NaN: none), `values` (per member, each
    constrained metric's window mean), the `constraints`, `mode` and the `diverged` members."""

    def __init__(self, fitness: Sequence[float], values: Sequence[Mapping[str, float]],
                 constraints: Mapping[str, Bound], mode: str = "max", diverged=frozenset()):
        self.fitness = np.asarray(fitness, dtype=np.float64)
        self.values, self.constraints, self.diverged = list(values), dict(constraints), frozenset(diverged)
        self.violations = [sum(violation(v.get(metric, math.nan), bound) for metric, bound in self.constraints.items())
                           for v in self.values]
        self.feasible = [excess == 0.0 for excess in self.violations]
        # Higher is better, whatever the mode; a member with no fitness ranks below any with one.
        signed = self.fitness if mode == "max" else -self.fitness
        self.score = np.where(np.isfinite(signed), signed, -np.inf)

    def _key(self, member: int) -> tuple:
        """Ascending: worse first."""
        feasible = self.feasible[member]
        return (member not in self.diverged, feasible, 0.0 if feasible else -self.violations[member],
                float(self.score[member]))

    def tied(self, a: int, b: int) -> bool:
        """Whether members `a` and `b` stand equal: alike on the bounds, and their fitness the
        same within TIE_TOLERANCE (relative to the larger)."""
        fa, fb = self.fitness[a], self.fitness[b]
        return (self.feasible[a] == self.feasible[b] and self.violations[a] == self.violations[b]
                and bool(np.isfinite(fa) and np.isfinite(fb))
                and abs(fa - fb) <= TIE_TOLERANCE * max(abs(fa), abs(fb), np.finfo(np.float32).tiny))

    def worst_first(self) -> list[int]:
        return sorted(range(len(self.fitness)), key=self._key)

    def best(self) -> int:
        return sorted(range(len(self.fitness)), key=self._key, reverse=True)[0]
