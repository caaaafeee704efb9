"""Evaluation along training (`eval.every_updates`): the policy evaluated as it trains, and how
far it has moved from where it started.

At update 0 (the initial policy), every `eval.every_updates` updates and at the run's last
update, each seed's current policy is evaluated by the env's protocols (the episodic
evaluation and the env's own, e.g. the foraging world's survival protocol) at the sizes of
`eval.along_*`, and its KL divergence from the initial policy and from the previous
evaluation's is measured on held-out states (`ppo.policy_distance`).
One row per evaluation and seed goes to evals.csv (written as metrics.csv is, `rundir.MetricsCSV`):
every `eval/*` metric of the protocols, `eval/kl_from_initial`, `eval/kl_from_previous` (blank
at update 0: there is no previous evaluation) and `eval/distance` = sqrt(KL from the initial policy).

The loop (run/loop.py) evaluates between chunks, which end on evaluation updates
(`build.chunk_updates`), before a checkpoint: a checkpoint at an evaluation update comes
after its rows (a failure during one checkpoints nothing: `Session.rows_recorded`), so a
relaunch after SIGKILL keeps the rows up to its checkpoint and does the later ones again, bit
for bit: an evaluation's key is a function of its seed (`along_key`), the held-out states of
its seed and the initial parameters the checkpoint keeps. Off (the default), none of this
exists: no program, no state, no file.

Every evaluation of a seed plays from the same key: the same worlds and the same random draws
(common random numbers), so what moves between two evaluations is the policy, not the luck of
the worlds. Measured on the foraging world's survival protocol at 32 worlds x 512 steps (two
proxy-trained policies, 10 keys): energy per 1k varies with the key by sd 25-26, their
difference by sd 38 under independent keys and 10 under a common key.

Compiled once per run: the episodic evaluation, the env's protocols (their own caches), the
held-out states' program and the distance program are built at the first evaluation and kept.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from pathlib import Path

import jax

from ppo_lab import rundir
from ppo_lab.ppo.policy_distance import distance_program, held_out_key, held_out_program
from ppo_lab.ppo.train import env_params_argument
from ppo_lab.run.evaluate import episode_runner, evaluate_seeds
from ppo_lab.run.selection import window_mean

log = logging.getLogger(__name__)

ALONG_KEY_SALT = 0xA10
KL_INITIAL, KL_PREVIOUS, DISTANCE = "eval/kl_from_initial", "eval/kl_from_previous", "eval/distance"


def along_key(seed: int) -> jax.Array:
    """The key of every evaluation of `seed` along training (common random numbers)."""
    return jax.random.fold_in(jax.random.PRNGKey(seed), ALONG_KEY_SALT)


class AlongTraining:
    """One run's evaluations along training (module docstring)."""

    def __init__(self, cfg, comp, run_dir: Path):
        # The `eval` section with its along-training sizes in place of the final evaluation's
        # (an env's protocol reads `episodes`, `survival_envs`, `survival_steps`).
        sized = dataclasses.replace(cfg.eval, episodes=cfg.eval.along_episodes, survival_envs=cfg.eval.along_survival_envs,
                                    survival_steps=cfg.eval.along_survival_steps)
        self.cfg = dataclasses.replace(cfg, eval=sized)
        self.every, self.comp, self.run_dir = cfg.eval.every_updates, comp, Path(run_dir)
        self.evaluated: set[int] | None = None  # the updates evals.csv holds, read at the first check (after a resume cut it)
        self.runner = self.held_program = self.distances = None  # built at the first evaluation
        self.held: dict[int, object] = {}  # seed -> its held-out states
        self.seconds = 0.0  # spent evaluating in this session

    def due(self, update: int, num_updates: int) -> bool:
        """Whether the run evaluates after `update` updates (and has not yet)."""
        if self.evaluated is None:
            self.evaluated = {row["update"] for row in rundir.read_metrics(self.run_dir / rundir.EVALS)}
        return (update % self.every == 0 or update == num_updates) and update not in self.evaluated

    def evaluate(self, state, update: int, wall_s: float, divergence) -> list[dict]:
        """Evaluate every seed's policy in `state` (this run's replicas) after `update` updates,
        append the rows to evals.csv and return them."""
        comp, cfg = self.comp, self.cfg
        self._build()
        replicas = comp.layout.seed_replicas(cfg.num_seeds)
        per_seed = [jax.tree.map(lambda x, r=r: x[r], (state.params, state.policy_anchors)) for r in replicas]
        results = evaluate_seeds(cfg, comp.env, comp.env_params, comp.network, [p for p, _ in per_seed], run=self.runner,
                                 keys=[along_key(seed) for seed in cfg.seeds])
        results = {f"eval/{name}": values for name, values in results.items()}
        results.update(self._distances(per_seed, update))
        masked = divergence.masked(results)  # a diverged seed's values blank, as in the final evaluation
        rows = [{"update": update, "seed": seed, "timesteps": update * comp.ppo.batch_size, "wall_s": round(wall_s, 3),
                 **{name: values[i] for name, values in masked.items()}} for i, seed in enumerate(cfg.seeds)]
        rundir.MetricsCSV(self.run_dir / rundir.EVALS).append(rows)
        self.evaluated.add(update)
        self._say(update, rows)
        return rows

    def _build(self) -> None:
        if self.runner is not None:
            return
        comp, cfg = self.comp, self.cfg
        self.runner = episode_runner(cfg, comp.env, comp.env_params, comp.network)
        self.held_program = held_out_program(comp.env, comp.env_params, comp.network, comp.trainer.dist, cfg.eval.kl_states,
                                             env_params_argument(comp.env, comp.env_params))
        self.distances = distance_program(comp.network, comp.trainer.dist, cfg.eval.kl_states)

    def _distances(self, per_seed: list, update: int) -> dict[str, list[float]]:
        """Per seed: KL from the initial policy and from the previous evaluation's, and d."""
        out = {KL_INITIAL: [], KL_PREVIOUS: [], DISTANCE: []}
        for seed, (params, anchors) in zip(self.cfg.seeds, per_seed):
            if seed not in self.held:  # the initial policy's states: the same in every session
                self.held[seed] = self.held_program(anchors.initial, held_out_key(seed))
            initial, previous = (float(x) for x in jax.device_get(self.distances(params, anchors, self.held[seed])))
            out[KL_INITIAL].append(initial)
            out[KL_PREVIOUS].append(previous if update > 0 else math.nan)  # update 0: no previous evaluation
            out[DISTANCE].append(math.sqrt(max(initial, 0.0)))
        return out

    def _say(self, update: int, rows: list[dict]) -> None:
        def mean(name):  # over the seeds that count (a diverged seed's values are null)
            return window_mean([r[name] for r in rows if r.get(name) is not None])
        log.info("evaluation along training at update %d: eval/episode_return %.4g, KL from the initial policy %.4g "
                 "(d %.3g), mean over %d seed(s)", update, mean("eval/episode_return"), mean(KL_INITIAL), mean(DISTANCE),
                 len(rows))
