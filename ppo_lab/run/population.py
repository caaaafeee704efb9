"""Population-based training on the host, between chunks (`pbt.*`, docs/pbt.md).

A population of P members is a run of P replicas of one compiled program (`loop.Replicas`),
member m training with seed `seed + m` and its own traced hyperparameters (`ppo.hypers.Hypers`,
an argument of the chunk: changing them never recompiles).

    Population(cfg, run_dir)      each member's explored keys drawn from the run's seed
    .resume(resumed)              or taken from the checkpoint (members, window, last step)
    .annotate(rows)               metrics.csv rows: `member` and each member's `pbt/<key>`;
                                  the fitness and each constrained metric collected per member
                                  since the last step
    .step(update, state)          every `interval_updates` updates: rank (run/selection.py: the
                                  members that meet `pbt.constraints` first, by mean fitness in
                                  `pbt.fitness_mode`); the bottom fraction copy a top-fraction
                                  member's learner state (gathered on the device) and
                                  hyperparameters, then perturb them; one line to pbt.jsonl.
                                  With pbt.exploit=false nothing is copied or perturbed (random
                                  search in the same program), and feasibility is recorded alike.

Schedules: an explored key that starts a schedule (`lr`, `ent_coef_initial`, `clip_eps`)
carries its end (`lr_final`, ...) with it at the config's ratio end/start, unless the end is
explored itself: a perturbation scales the schedule's start and end together, and the schedule
stays indexed by the run's update, so a copied member goes on from where the run is.

The exploration PRNG of a step is `default_rng([seed, update])`: a function of the run's seed
and the step's update, so a resumed run draws what the uninterrupted one drew with nothing but
the update to keep. A copy keeps its own PRNG key (`LearnerState.key`): it does not replay its
source's actions and env randomness.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path

import jax
import numpy as np

from ppo_lab import rundir
from ppo_lab.config import RunConfig
from ppo_lab.errors import ConfigError
from ppo_lab.ppo.hypers import SCHEDULES, Hypers
from ppo_lab.ppo.parallel import replicated
from ppo_lab.run import processes
from ppo_lab.run.selection import Standing, window_mean

log = logging.getLogger(__name__)

COLUMN = "pbt/"  # metrics.csv: each member's current value of an explored key, `pbt/lr`
DRAW = 0  # the update whose PRNG draws the initial members (steps are at updates >= 1)


def _draw(rng: np.random.Generator, low: float, high: float, log_scale: bool) -> float:
    if log_scale:
        return float(np.exp(rng.uniform(np.log(low), np.log(high))))
    return float(rng.uniform(low, high))


def _finite_or_none(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _copy_rows(state, index):
    return jax.tree.map(lambda x: x[index], state).replace(key=state.key)


_gather = jax.jit(_copy_rows)


def copy_index(state, source) -> np.ndarray | jax.Array:
    """The copy's index as the program takes it: a host array in one process (converting it on
    the device would be one more small program); in a run of several processes the state is
    a global array over all their devices, and the index is replicated on that mesh too."""
    index = np.asarray(source, dtype=np.int32)
    if jax.process_count() == 1:
        return index
    return replicated(jax.tree.leaves(state)[0].sharding.mesh, index)


def gather(state, source: np.ndarray, compiled=None):
    """Each replica's state replaced by that of replica `source[i]`, on the device, in one
    program (compiled once per run, not one small program per leaf); every copy keeps its
    own PRNG key. `compiled`: that program compiled ahead (`Population.compile_gather`), which
    keeps the state's layout (across processes XLA moves a member's slices with its own
    collectives)."""
    return (compiled or _gather)(state, copy_index(state, source))


def lineage(steps: list[dict], member: int, end_update: int) -> list[dict]:
    """The segments of training that `member`'s final state went through, in time order:
    [{member, from_update, until_update}] (it copied another at each segment's start)."""
    segments, current, until = [], member, end_update
    for step in reversed(steps):
        source = step["copied"][current]
        if source is not None:
            segments.append({"member": current, "from_update": step["update"], "until_update": until})
            current, until = source, step["update"]
    segments.append({"member": current, "from_update": 0, "until_update": until})
    return segments[::-1]


class Population:
    """The members' explored hyperparameters, fitness since the last step, and the steps."""

    def __init__(self, cfg: RunConfig, run_dir: Path):
        self.pbt, self.seed, self.run_dir = cfg.pbt, cfg.seed, Path(run_dir)
        self.base = dataclasses.asdict(cfg.ppo)
        rng = np.random.default_rng([cfg.seed, DRAW])
        self.members = [{k: _draw(rng, r.low, r.high, r.log) for k, r in self.pbt.hypers.items()}
                        for _ in range(self.pbt.population)]
        self.window: list[list[float]] = [[] for _ in self.members]  # fitness per member since the last step
        # each constrained metric per member since the last step: {metric: [[values] per member]}
        self.bounded_window = {metric: [[] for _ in self.members] for metric in self.pbt.constraints}
        self.last_step = 0
        self.last_fitness: list | None = None
        self.last_bounded: list | None = None  # the last step's constrained values per member (summary's fallback)
        self.compiled_gather = None  # `compile_gather`: the exploit's copy, compiled before training
        self.step_s = 0.0  # this session's host time in steps, the swap included (summary `pbt.step_s`)

    # -- hyperparameters --------------------------------------------------------------
    def values(self, member: int) -> dict:
        """Member `member`'s traced keys: the config's, its explored ones, their schedules' ends."""
        values = dict(self.base)
        explored = self.members[member]
        values.update(explored)
        for start, end in SCHEDULES.values():
            if start in explored and end not in self.pbt.hypers and self.base[start]:
                values[end] = self.base[end] * explored[start] / self.base[start]
        return values

    def hypers(self):
        """The members' stacked `Hypers` (the chunk's argument)."""
        return Hypers.stack([Hypers.from_values(self.values(m)) for m in range(len(self.members))])

    def into(self, comp):
        """`comp` (run/build.py Components) with the members' hyperparameters."""
        return dataclasses.replace(comp, hypers=self.hypers())

    # -- resume ---------------------------------------------------------------------
    def resume(self, resumed) -> None:
        """Take the population at the checkpoint (a fresh run: as drawn); pbt.jsonl cut back to it."""
        path = self.run_dir / rundir.PBT_LOG
        source = resumed.source / rundir.PBT_LOG if resumed.source is not None else path
        if processes.writes():  # one writer per run dir (process 0 of a multi-process run)
            dropped = rundir.pbt_log_until(source, path, resumed.start_update if resumed.pbt is not None else 0)
            if dropped:
                log.info("pbt: dropped %d exploit step(s) written after the checkpoint", dropped)
        if resumed.pbt is not None:
            saved = resumed.pbt
            self.members, self.window = saved["members"], saved["window"]
            self.last_step, self.last_fitness = saved["last_step"], saved.get("last_fitness")
            # A checkpoint from before a bound was added (a relaunch under allow_config_change)
            # holds no window of its metric: it is collected from the checkpoint's update on.
            kept = saved.get("bounded_window") or {}
            self.bounded_window = {metric: kept.get(metric, [[] for _ in self.members]) for metric in self.pbt.constraints}
            self.last_bounded = saved.get("last_bounded")

    def state(self) -> dict:
        """What the checkpoint keeps (JSON): the exploration PRNG is (seed, update), nothing to keep."""
        return {"members": self.members, "window": self.window, "last_step": self.last_step,
                "last_fitness": self.last_fitness, "bounded_window": self.bounded_window,
                "last_bounded": self.last_bounded}

    def check_fitness(self, logged: list[str]) -> None:
        """`pbt.fitness` and every metric of `pbt.constraints` must be metrics the run logs (the
        lowered chunk's, before it compiles): a ConfigError naming them otherwise."""
        if self.pbt.fitness not in logged:
            raise ConfigError("pbt.fitness", self.pbt.fitness, f"a metric this run logs: {', '.join(logged)}")
        for metric in self.pbt.constraints:
            if metric not in logged:
                raise ConfigError("pbt.constraints", metric, f"metrics this run logs as keys: {', '.join(logged)}")

    # -- rows -------------------------------------------------------------------------
    def annotate(self, rows: list[dict]) -> None:
        """Each row's member and its current values; the fitness collected."""
        for row in rows:
            member = row["seed"] - self.seed
            row["member"] = member
            row.update({f"{COLUMN}{k}": v for k, v in self.members[member].items()})
            self.window[member].append(float(row[self.pbt.fitness]))
            for metric, window in self.bounded_window.items():
                window[member].append(float(row[metric]))

    # -- the exploit/explore step -----------------------------------------------------
    def due(self, update: int, num_updates: int) -> bool:
        return update % self.pbt.interval_updates == 0 and self.last_step < update < num_updates

    def fitness(self) -> np.ndarray:
        """Mean fitness of each member since the last step (NaN where no episode ended)."""
        return np.asarray([window_mean(w) for w in self.window], dtype=np.float64)

    def bounded(self) -> list[dict]:
        """Each member's mean of each constrained metric since the last step (NaN: none finite)."""
        return [{metric: window_mean(w[member]) for metric, w in self.bounded_window.items()}
                for member in range(len(self.members))]

    def standing(self, fitness, bounded, diverged=frozenset()) -> Standing:
        return Standing(fitness, bounded, self.pbt.constraints, self.pbt.fitness_mode, diverged)

    def choose(self, standing: Standing, rng: np.random.Generator) -> list:
        """Which member each copies (None: keeps its own): the bottom fraction a random
        top-fraction member, as `standing` ranks them, unless the two tie (`Standing.tied`: copying an
        equal would only throw away the copier's own lineage, and which member ranks "best" among
        equals is the sort's order). A diverged member ranks last and copies one whatever the
        fraction (its state went non-finite: it has nothing to go on from); none copies a diverged one."""
        copied: list = [None] * len(self.members)
        if not self.pbt.exploit:
            return copied
        diverged = standing.diverged
        ranked = standing.worst_first()
        healthy = [m for m in ranked if m not in diverged]
        count = max(1, int(len(self.members) * self.pbt.fraction))
        top = healthy[-count:]
        if not top:
            return copied
        for member in ranked[:max(count, len(diverged))]:
            source = int(rng.choice(top))  # drawn also for a tie: the steps after it draw as without one
            if member in diverged or not standing.tied(source, member):
                copied[member] = source
        return copied

    def explore(self, values: dict, rng: np.random.Generator) -> dict:
        """A copied member's explored keys perturbed: resampled, or scaled by a factor; kept in range."""
        out = {}
        for key, r in self.pbt.hypers.items():
            if rng.random() < self.pbt.perturb.resample_prob:
                value = _draw(rng, r.low, r.high, r.log)
            else:
                value = values[key] * float(rng.choice(self.pbt.perturb.factors))
            out[key] = float(min(max(value, r.low), r.high))
        return out

    def step(self, update: int, state, divergence=None):
        """The step at `update`: (new state, new stacked Hypers), and its line in pbt.jsonl.
        `divergence` (run/divergence.py): the members diverged by now rank last; one that
        copies another counts again."""
        t0 = time.perf_counter()
        rng = np.random.default_rng([self.seed, update])
        fitness, bounded = self.fitness(), self.bounded()
        diverged = frozenset(e["seed"] - self.seed for e in divergence.listed()) if divergence is not None else frozenset()
        standing = self.standing(fitness, bounded, diverged)
        copied = self.choose(standing, rng)
        members = [dict(m) for m in self.members]
        for member, source in enumerate(copied):
            if source is not None:
                members[member] = self.explore(self.members[source], rng)
        self.members = members
        if any(source is not None for source in copied):
            state = gather(state, np.asarray([m if s is None else s for m, s in enumerate(copied)]), self.compiled_gather)
        self.last_fitness = [None if not np.isfinite(f) else float(f) for f in fitness]
        self.last_bounded = [{m: _finite_or_none(v) for m, v in values.items()} for values in bounded]
        if processes.writes():  # every process decided the same step (the same rows, the same PRNG)
            rundir.append_pbt_step(self.run_dir / rundir.PBT_LOG, {
                "update": update, "fitness": self.last_fitness, "hypers": members, "copied": copied,
                "exploit": self.pbt.exploit, "diverged": sorted(diverged),
                **({"constraints": self.last_bounded, "feasible": standing.feasible} if self.pbt.constraints else {})})
        for member in diverged:
            if copied[member] is not None:
                divergence.forget(self.seed + member)
                log.warning("pbt: member %d had diverged; it copied member %d at update %d and trains on from there",
                            member, copied[member], update)
        self.window, self.last_step = [[] for _ in members], update
        self.bounded_window = {metric: [[] for _ in members] for metric in self.pbt.constraints}
        log.info("pbt step at update %d: %s (%.3f s)", update, ", ".join(
            f"{m}<-{s}" for m, s in enumerate(copied) if s is not None) or "nothing copied", time.perf_counter() - t0)
        return state, self.hypers()

    def compile_gather(self, state) -> float:
        """Compile the exploit's state copy before the first chunk, so that its compile (0.1 s
        idle, 0.7 s on a loaded 2-core CPU) counts in `compile_s` as the chunk's does, not in
        the first step's training time; ahead of time, so a step whose state were laid out
        otherwise would fail rather than compile again. Random search copies nothing. Seconds."""
        if not self.pbt.exploit:
            return 0.0
        t0 = time.perf_counter()
        identity = copy_index(state, np.arange(len(self.members)))
        # Out laid out as in: left to itself XLA returns a gather replicated on every device,
        # and the swap into the chunk's layout would copy the whole state once more per step.
        layout = jax.tree.map(lambda x: x.sharding, state)
        self.compiled_gather = jax.jit(_copy_rows, out_shardings=layout).lower(state, identity).compile()
        return time.perf_counter() - t0

    # -- the end ------------------------------------------------------------------------
    def summary(self, end_update: int, diverged: list[dict] = ()) -> dict:
        """summary.json's `pbt`: the best member (ranked as a step ranks them, over the last
        interval: under `pbt.constraints`, the best that met them), its hyperparameters and
        lineage, and how many exploit steps copied (`steps_copied`; `copies`: members replaced in
        all). A member diverged at the end (`diverged`: summary.json's entries) is never the
        best. With constraints: each member's constrained values and whether it met them, and
        `best_feasible` (false: no member met them, the best is the one that came closest)."""
        fitness, bounded = self.fitness(), self.bounded()
        if not np.isfinite(fitness).any() and self.last_fitness is not None:
            fitness = np.asarray([np.nan if f is None else f for f in self.last_fitness])
            bounded = [{m: np.nan if v is None else v for m, v in values.items()} for values in self.last_bounded or bounded]
        dropped = frozenset(entry["seed"] - self.seed for entry in diverged)
        fitness[sorted(dropped)] = np.nan
        standing = self.standing(fitness, bounded, dropped)
        best = standing.best()
        steps = rundir.read_pbt_log(self.run_dir / rundir.PBT_LOG)
        copies = [sum(source is not None for source in step["copied"]) for step in steps]
        out = {"population": len(self.members), "exploit": self.pbt.exploit, "steps": len(steps),
               "steps_copied": sum(n > 0 for n in copies), "copies": sum(copies), "fitness_metric": self.pbt.fitness,
               "step_s": round(self.step_s, 3),
               "best_member": best, "best_hypers": self.members[best],
               "fitness": [_finite_or_none(f) for f in fitness],
               "lineage": lineage(steps, best, end_update)}
        if self.pbt.constraints:
            feasible = [ok and m not in dropped for m, ok in enumerate(standing.feasible)]
            out.update(constraints=[{m: _finite_or_none(v) for m, v in values.items()} for values in bounded],
                       feasible=feasible, best_feasible=feasible[best])
            if not feasible[best]:
                log.warning("pbt: no member met pbt.constraints over the last interval; the best member (%d) is the "
                            "one that came closest", best)
        return out
