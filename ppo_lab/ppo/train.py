"""The pure PPO trainer: one jitted chunk of K updates, vmapped over replicas.

Per replica (one seed, or one device's share of a seed's envs) training is a pure function
of a PRNG key, built PureJaxRL-style from nested `lax.scan`s: updates -> rollout steps, and
epochs -> minibatches. The host calls `Trainer.chunk` repeatedly and logs, checkpoints and
checks stop conditions between chunks (the HackMatrix idea: jit a chunk, not the run).

`Trainer` reads top to bottom in calling order: `init`; `chunk` -> `update` -> `collect` (the
rollout: `policy`, `record`, the truncation bootstrap) -> `advantages` -> `epoch` ->
`minibatch` -> `loss`. What flows between them is named: `Transition` (one step of the rollout),
`PolicyStep` (the sampling policy's outputs), `RolloutStats` (the running episode counters),
`Minibatch`; the traced hyperparameters are one struct (`ppo.hypers.Hypers`). The network is
called per step through `ppo.rollout.policy_and_value`, as evaluation and replay call it.

Replicas are laid out by `ppo_lab.ppo.parallel`: either one replica per seed (seeds sharded
across devices) or, for a single seed on several devices, one replica per device with
gradients averaged across devices (`grad_axis`).

A recurrent network (`network.recurrent`) keeps each env's state in `LearnerState.memory`,
carried across updates, chunks and checkpoints. Its update trains on sequences: the rollout's
transitions stay [T, envs], and each minibatch is the whole sequences of `num_envs /
num_minibatches` envs (shuffled over envs, time in order), re-run through the network from the
state each env started the rollout in, zeroed where the previous step ended an episode
(`Transition.reset`), so the first epoch reproduces the rollout's log-probs and values.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, NamedTuple

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ppo_lab.config import PPOConfig
from ppo_lab.ppo import normalize, policies
from ppo_lab.ppo.losses import LossTerms, compute_gae, explained_variance, ppo_loss_terms
from ppo_lab.ppo.hypers import Hypers, StaticPPO, learning_rate_schedule, schedule_values
from ppo_lab.ppo import obs_storage
from ppo_lab.ppo.policy_distance import PolicyAnchors
from ppo_lab.ppo.rollout import (Rollout, Step, batched_mask, batched_reset, batched_step, initial_memory,
                                  policy_and_value, rollout, value_of)
from ppo_lab.ppo import value_norm as vn
from ppo_lab.ppo.grad_clip import clip_policy_and_value


@flax.struct.dataclass
class LearnerState:
    """Everything one replica needs to continue training: the checkpoint's content."""

    params: Any
    opt_state: Any
    env_state: Any
    obs: jax.Array
    episode_return: jax.Array  # running return of each env's current episode
    episode_length: jax.Array
    key: jax.Array
    value_norm: Any = None  # PopArt statistics with ppo.value_norm=popart, else None
    # A recurrent network's (state, reset) per env: its state after the last step (not yet
    # reset) and whether that step ended an episode (ppo.rollout.initial_memory); else None.
    memory: Any = None
    reward_norm: Any = None  # normalize.RewardNorm with ppo.normalize_reward, else None
    # Evaluation along training: the parameters the policy's distance is measured from
    # (ppo.policy_distance.PolicyAnchors: update 0's and the last evaluation's), else None.
    # Training never reads them; they ride in the state so that a checkpoint holds them.
    policy_anchors: Any = None


class Transition(NamedTuple):
    obs: Any  # as stored for the update (ppo/obs_storage.py): an array, or (policy, critic) channels
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    reward: jax.Array  # training reward, with the truncation bootstrap added
    done: jax.Array
    finished_return: jax.Array  # return of the episode that ended here (0 where none did)
    finished_length: jax.Array
    env_metrics: dict
    mask: jax.Array | None = None  # bool [num_actions]: valid actions at `obs` (None: the env has no mask)
    obs_cast: Any = None  # obs_storage.cast_stats of this step (None: observations stored as float32)
    reset: jax.Array | None = None  # recurrent: the state was zeroed before this step (None: feed-forward)
    # 1.0, or 0.0 where the env spent the step resetting (`info["resetting"]`: EnvPool resets on
    # the step after an episode ends, ignoring the action): such a step weighs nothing in the
    # update. None: the env never does that.
    weight: jax.Array | None = None
    # With ppo.bootstrap_truncation, during the rollout only (None in the update's batch): the
    # step was cut short by a time limit (truncated, not terminated), and the value of the
    # previous step's final observation, computed in this step's network pass.
    cut_short: jax.Array | None = None
    previous_final_value: jax.Array | None = None


def make_optimizer(ppo: PPOConfig | StaticPPO, num_updates, hypers: Hypers) -> optax.GradientTransformation:
    """Adam with clipping and the learning-rate schedule; `hypers`: a replica's traced
    hyperparameters (ppo/hypers.py). Pure functions: built inside the chunk, it closes over that
    replica's values; the state's structure never depends on them."""
    # inject_hyperparams keeps the scheduled learning rate in the optimiser state, by name.
    steps_per_update = ppo.update_epochs * ppo.num_minibatches
    schedule = learning_rate_schedule(ppo, num_updates, steps_per_update, hypers)
    # separate_grad_clip: the policy's and the value function's gradients clipped apart.
    clip = clip_policy_and_value if ppo.separate_grad_clip else optax.clip_by_global_norm
    return optax.chain(
        clip(hypers.max_grad_norm),
        optax.inject_hyperparams(optax.adam)(learning_rate=schedule, eps=ppo.adam_eps),
    )


def current_learning_rate(opt_state) -> jax.Array:
    """The learning rate of the optimiser's last step (its injected hyperparameter)."""
    return optax.tree.get(opt_state, "learning_rate", filtering=lambda _, value: isinstance(value, jax.Array))


class PolicyStep(NamedTuple):
    """What the sampling policy hands `record` at each rollout step."""
    log_prob: jax.Array
    value: jax.Array  # in return units (PopArt read back)
    previous_final_value: jax.Array | None  # bootstrap: the value of the previous step's final observation
    reset: jax.Array | None  # recurrent: the state was zeroed before this step (None: feed-forward)


class BootstrapObs(NamedTuple):
    """The rollout's carried observation with `ppo.bootstrap_truncation`: the observation, and
    the previous step's final observation (whose value this step's network pass computes)."""
    obs: Any
    final_obs: Any


class RolloutStats(NamedTuple):
    """Carried over the rollout's steps, then kept in the learner state."""
    episode_return: jax.Array  # running return of each env's current episode
    episode_length: jax.Array
    reward_norm: Any = None  # the reward normaliser's statistics after the rollout (None: off)


class Minibatch(NamedTuple):
    """The update's batch, or one minibatch of it: steps [N, ...] (feed-forward), or env
    sequences [T, B, ...] with the state each env started the rollout in (recurrent)."""
    transitions: Transition
    advantages: jax.Array
    returns: jax.Array
    start_state: Any = None  # recurrent: the carry [B, ...] the sequences start from; else None


@dataclasses.dataclass(frozen=True, eq=False)
class Trainer:
    """The per-replica PPO functions: the static parts of one replica's training, and its
    methods in calling order: `init`; `chunk` -> `update` -> `collect` (the rollout) ->
    `advantages` -> `epoch` -> `minibatch` (-> `loss`). Each takes `hypers`, the replica's
    traced hyperparameters (`ppo.hypers.Hypers`): arguments of the program, never constants.
    Built by `make_trainer`.

    `ppo` is the config's static part (`StaticPPO.of(ppo)`): it has no traced key, so a value
    that differs between the cells of a grid or the members of a population can only be read
    from `hypers`, never baked into the program as cell 0's constant."""

    ppo: StaticPPO
    env: Any
    env_params: Any
    network: Any
    num_envs: int  # this replica's share of `ppo.num_envs`
    chunk_updates: int  # K: updates per call of `chunk`
    grad_axis: str | None  # the device axis one seed's gradients are averaged over (None: not split)
    dist: policies.ActionDistribution  # categorical or diagonal Gaussian, by the env's action space
    env_step: Callable  # batched, given the env's form of the policy's action
    env_mask: Callable | None  # the batch's valid actions (None: the env has no mask)
    keeps_policy_anchors: bool = False  # the state holds `policy_anchors` (evaluation along training)

    @property
    def num_updates(self) -> int:
        return self.ppo.num_updates

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.ppo.num_steps

    @property
    def actor_channels(self) -> int | None:
        """A privileged critic: the policy sees the first N channels, the critic all of them."""
        return self.network.actor_obs_channels

    def for_env_params(self, env_params) -> "Trainer":
        """This trainer stepping envs of `env_params` (a program argument: `env_params_argument`)."""
        return dataclasses.replace(self, env_params=env_params, **env_functions(self.env, env_params, self.num_envs, self.dist))

    def init(self, param_key, env_key, hypers: Hypers, num_updates, env_params=None) -> LearnerState:
        """One replica's state at update 0. `num_updates`: the run's updates, as the program's
        argument (see `chunk`); `env_params`: the env's params as an argument for an env whose
        params are data (`env_params_argument`), None for one whose params are constants."""
        if env_params is not None:
            return self.for_env_params(env_params).init(param_key, env_key, hypers, num_updates)
        ppo, num_envs = self.ppo, self.num_envs
        obs, env_state = batched_reset(self.env, self.env_params, env_key, num_envs)
        params = self.network.init_params(param_key, obs[:1])
        zeros = jnp.zeros((num_envs,), jnp.float32)
        return LearnerState(
            params=params,
            opt_state=make_optimizer(ppo, num_updates, hypers).init(params),
            env_state=env_state,
            obs=obs,
            episode_return=zeros,
            episode_length=zeros.astype(jnp.int32),
            key=jax.random.fold_in(env_key, 1),
            value_norm=vn.init() if ppo.value_norm == "popart" else None,
            memory=initial_memory(self.network, num_envs),
            reward_norm=normalize.init_reward_norm(num_envs) if ppo.normalize_reward else None,
            policy_anchors=PolicyAnchors(params, params) if self.keeps_policy_anchors else None,
        )

    def chunk(self, state: LearnerState, start_update, hypers: Hypers, num_updates, env_params=None):
        """K updates in one scan: `(state, metrics[K])`; updates past `num_updates` are skipped
        (a cheap cond: `start_update` and `num_updates` are the same for every replica, so the
        predicate is not batched).

        `num_updates` (the run's, which the schedules anneal over) is an argument of the lab's
        programs, not a constant: runs that differ only in `ppo.total_timesteps` (a resumed run
        given a larger budget, a test's shorter run) are one program, which the persistent
        compilation cache serves. `env_params`, for an env whose params are data
        (`Env.params_are_data`), likewise (None: the env's params are constants)."""
        if env_params is not None:
            return self.for_env_params(env_params).chunk(state, start_update, hypers, num_updates)

        layout = {}  # the metrics' tree and each leaf's shape and dtype, recorded when `body` is traced

        def body(state, offset):
            index = start_update + offset
            # One trace of `update` for both branches of the cond: `skip` needs only its output
            # shapes, and tracing it a second time for them was about a tenth of a chunk's compile.
            traced, shapes = jax.make_jaxpr(self.update, return_shape=True)(state, index, hypers, num_updates)

            def update(state, index, hypers, num_updates):
                leaves = jax.tree.leaves((state, index, hypers, num_updates))
                outputs = jax.core.eval_jaxpr(traced.jaxpr, traced.consts, *leaves)
                return jax.tree.unflatten(jax.tree.structure(shapes), outputs)

            def skip(state, index, hypers, num_updates):
                """`update`'s outputs with the state unchanged and every metric NaN."""
                return state, jax.tree.map(lambda s: jnp.full(s.shape, jnp.nan, s.dtype), shapes[1])

            new_state, metrics = jax.lax.cond(index < num_updates, update, skip, state, index, hypers, num_updates)
            packed, layout["tree"], layout["leaves"] = pack_metrics(metrics)
            return new_state, packed

        new_state, packed = jax.lax.scan(body, state, jnp.arange(self.chunk_updates))
        metrics = unpack_metrics(packed, layout["tree"], layout["leaves"])
        # A chunk in which an update's losses, gradients or state went non-finite is not kept:
        # the replica returns to the state it started the chunk from (finite: the last chunk it
        # kept, what a checkpoint may then save), and the host, seeing `NONFINITE`, stops
        # counting it from that update on (run/divergence.py). Selected once per chunk: once
        # per update, a select per leaf of the state was about 45 kernels an update.
        keep = jnp.logical_not(jnp.any(metrics[NONFINITE] > 0))  # NaN (a skipped update) is not a failure
        return jax.tree.map(lambda new, old: jnp.where(keep, new, old), new_state, state), metrics

    def update(self, state: LearnerState, update_index, hypers, num_updates):
        """One PPO update: a rollout, its advantages, `update_epochs` epochs of minibatches."""
        ppo = self.ppo
        tx = make_optimizer(ppo, num_updates, hypers)
        sched = schedule_values(ppo, update_index, num_updates, hypers)
        out = self.collect(state, hypers)
        traj, stats = out.records, out.stats
        advantages, returns = self.advantages(state, out, hypers)
        params, opt_state, value_norm, fit_returns, fit_values = self.value_targets(state, returns, traj.value)
        batch = self.batch(state, traj._replace(value=fit_values), advantages, fit_returns)
        (params, opt_state, key), terms = jax.lax.scan(
            lambda carry, _: self.epoch(carry, batch, sched["clip_eps"], sched["ent_coef"], hypers, tx),
            (params, opt_state, out.key), None, ppo.update_epochs,
        )
        if ppo.normalize_obs:  # after the epochs: they saw the statistics the rollout saw
            params = normalize.update_obs_norm(params, obs_storage.load(traj.obs), self.grad_axis)
        metrics = self.update_metrics(traj, returns, terms, opt_state, sched, value_norm)
        new_state = LearnerState(params, opt_state, out.env_state, out.obs, stats.episode_return, stats.episode_length,
                                 key, value_norm, out.memory, stats.reward_norm, state.policy_anchors)
        metrics[NONFINITE] = nonfinite_code(metrics, new_state, self.grad_axis)
        return new_state, metrics

    def collect(self, state: LearnerState, hypers: Hypers) -> Rollout:
        """One rollout of `ppo.num_steps` steps with the sampled policy: the transitions
        (`Rollout.records`), and the running episode counters carried over (`RolloutStats`).

        With `ppo.bootstrap_truncation` (a time limit is not a terminal state: a step cut short
        by the limit is credited gamma x the value of its final observation) the value of step
        t's final observation is computed in step t+1's forward pass, stacked with step t+1's
        observations (`ActorCritic.policy_and_value`'s `extra_obs`), and added to step t's
        reward after the loop; the last step's comes from one extra pass. One network call per
        step instead of two: the second call was 11% of a CartPole update at 4 envs on a CPU,
        and 36% of the reference CNN's rollout on an H100 (docs/performance.md)."""
        bootstrap = self.ppo.bootstrap_truncation
        stats = RolloutStats(state.episode_return, state.episode_length)
        env_step = self.step_keeping_final_observation if bootstrap else self.env_step
        obs = BootstrapObs(state.obs, state.obs) if bootstrap else state.obs  # no previous step yet: its value is dropped
        out = rollout(env_step, functools.partial(self.policy, state), state.env_state, obs, state.key,
                      self.ppo.num_steps, record=self.record, stats=stats, action_mask=self.env_mask, memory=state.memory)
        traj, reward_norm = self.scale_rewards(state, out.records, hypers)  # the env's rewards
        if bootstrap:  # the bootstrap is a value, already scaled
            traj = traj._replace(reward=traj.reward + self.truncation_bootstrap(state, out, hypers))
            out = out._replace(obs=out.obs.obs)
        return out._replace(records=traj._replace(cut_short=None, previous_final_value=None),
                            stats=out.stats._replace(reward_norm=reward_norm))

    def policy(self, state: LearnerState, obs, key, mask, memory=None):
        """The rollout's sampling policy: the action, `PolicyStep` (and a recurrent network's state)."""
        final_obs = None
        if self.ppo.bootstrap_truncation:
            obs, final_obs = obs
        net = policy_and_value(self.network, state.params, obs, memory, final_obs)
        action = self.dist.sample(key, net.policy, mask)
        extras = PolicyStep(self.dist.log_prob(net.policy, action, mask), vn.read(state.value_norm, net.value),
                            net.extra_value, None if memory is None else memory[1])
        if memory is None:
            return action, extras
        return action, extras, net.carry

    def record(self, stats: RolloutStats, step: Step):
        """One step's `Transition`, and the running episode counters."""
        ep_return, ep_length = stats.episode_return, stats.episode_length
        reward = step.reward.astype(jnp.float32)
        done = jnp.logical_or(step.terminated, step.truncated)
        # A reset step (EnvPool's, `info["resetting"]`) belongs to no episode: it starts the
        # counters afresh (an episode cut off by a resume's new envs is dropped, not counted).
        resetting = step.info.get("resetting")
        if resetting is not None:
            ep_return, ep_length = jnp.where(resetting, 0.0, ep_return), jnp.where(resetting, -1, ep_length)
        ep_return = ep_return + reward
        ep_length = ep_length + 1
        bootstrap = self.ppo.bootstrap_truncation
        obs = step.obs.obs if bootstrap else step.obs
        next_obs = step.next_obs.obs if bootstrap else step.next_obs
        critic_after_step = self.ppo.privileged_view_after_step and self.actor_channels is not None
        stored = obs_storage.store(obs, self.ppo.rollout_obs_dtype, self.actor_channels,
                                   critic_from=next_obs if critic_after_step else None)
        cast = None if self.ppo.rollout_obs_dtype == "float32" else obs_storage.cast_stats(obs, stored, self.actor_channels)
        transition = Transition(
            obs=stored, action=step.action, log_prob=step.extras.log_prob, value=step.extras.value, reward=reward,
            done=done, finished_return=jnp.where(done, ep_return, 0.0), finished_length=jnp.where(done, ep_length, 0),
            env_metrics=step.info.get("metrics", {}), mask=step.mask, obs_cast=cast, reset=step.extras.reset,
            weight=None if resetting is None else 1.0 - resetting.astype(jnp.float32),
            cut_short=jnp.logical_and(step.truncated, jnp.logical_not(step.terminated)) if bootstrap else None,
            previous_final_value=step.extras.previous_final_value,
        )
        return RolloutStats(jnp.where(done, 0.0, ep_return), jnp.where(done, 0, ep_length)), transition

    def step_keeping_final_observation(self, key, env_state, action):
        """`env_step` whose observation is `BootstrapObs(next observation, final observation)`."""
        obs, env_state, reward, terminated, truncated, info = self.env_step(key, env_state, action)
        return BootstrapObs(obs, info["final_observation"]), env_state, reward, terminated, truncated, info

    def truncation_bootstrap(self, state: LearnerState, out: Rollout, hypers):
        """gamma x the value of each cut-short step's final observation: step t's comes from step
        t+1's pass (`Transition.previous_final_value`), the last step's from one extra pass."""
        traj = out.records
        # The last step's final observations continue its episodes: the state is not reset.
        no_reset = None if out.memory is None else (out.memory[0], jnp.zeros_like(out.memory[1]))
        last_final_value = value_of(self.network, state.params, out.obs.final_obs, no_reset)
        final_value = jnp.concatenate([traj.previous_final_value[1:], last_final_value[None]])
        return hypers.gamma * jax.lax.stop_gradient(vn.read(state.value_norm, final_value)) * traj.cut_short

    def scale_rewards(self, state: LearnerState, traj: Transition, hypers):
        """`ppo.normalize_reward`: the rollout's rewards over the running std of the discounted
        return (the statistics moved by this rollout); unchanged otherwise."""
        if state.reward_norm is None:
            return traj, None
        reward, reward_norm = normalize.scale_rewards(state.reward_norm, traj.reward, traj.done, hypers.gamma,
                                                      self.grad_axis)
        return traj._replace(reward=reward), reward_norm

    def advantages(self, state: LearnerState, out: Rollout, hypers):
        """GAE's advantages and returns of the rollout, bootstrapped from its last observation's value."""
        traj = out.records
        last_value = vn.read(state.value_norm, value_of(self.network, state.params, out.obs, out.memory))
        return compute_gae(traj.reward, traj.value, traj.done, last_value, hypers.gamma, hypers.gae_lambda)

    def value_targets(self, state: LearnerState, returns, values):
        """The value loss's targets: returns and old values as they are, or, with PopArt, in the
        units of statistics moved toward this batch (the head and its Adam moments rescaled so
        its outputs in return units stay put). Returns (params, opt_state, stats, returns, values)."""
        if state.value_norm is None:
            return state.params, state.opt_state, None, returns, values
        stats, params, opt_state, returns, values = vn.refit(state.value_norm, state.params, state.opt_state, returns,
                                                             values, self.ppo.popart_beta_min, axis_name=self.grad_axis)
        return params, opt_state, stats, returns, values

    def batch(self, state: LearnerState, traj: Transition, advantages, returns) -> Minibatch:
        """The update's batch: the steps flattened (feed-forward), or whole env sequences from
        the state each env started the rollout in (recurrent)."""
        batch = Minibatch(traj._replace(env_metrics={}, obs_cast=None), advantages, returns)
        if state.memory is None:
            return jax.tree.map(lambda x: x.reshape((self.batch_size,) + x.shape[2:]), batch)
        return batch._replace(start_state=state.memory[0])

    def epoch(self, carry, batch: Minibatch, clip_eps, ent_coef, hypers, tx):
        """One pass over the batch in shuffled minibatches: `((params, opt_state, key), loss terms [M])`."""
        params, opt_state, key = carry
        key, perm_key = jax.random.split(key)
        (params, opt_state), terms = jax.lax.scan(
            lambda carry, minibatch: self.minibatch(carry, minibatch, clip_eps, ent_coef, hypers, tx),
            (params, opt_state), self.shuffle(perm_key, batch),
        )
        return (params, opt_state, key), terms

    def shuffle(self, key, batch: Minibatch) -> Minibatch:
        """Minibatches [num_minibatches, ...] of the batch: shuffled steps (feed-forward), or
        whole env sequences shuffled over envs, time kept in order (recurrent: the batch is
        [T, B] with the start state [B], and each minibatch has B / num_minibatches envs)."""
        m = self.ppo.num_minibatches
        if batch.start_state is None:
            permutation = jax.random.permutation(key, self.batch_size)
            return jax.tree.map(lambda x: x[permutation].reshape((m, self.batch_size // m) + x.shape[1:]), batch)
        envs = jax.random.permutation(key, self.num_envs).reshape(m, -1)  # [M, B / M]
        sequences = jax.tree.map(lambda x: jnp.moveaxis(x[:, envs], 1, 0), batch[:3])  # [M, T, B / M, ...]
        return Minibatch(*sequences, jax.tree.map(lambda x: x[envs], batch.start_state))

    def minibatch(self, carry, minibatch: Minibatch, clip_eps, ent_coef, hypers, tx):
        """One gradient step (averaged across devices when one seed is split over them)."""
        params, opt_state = carry
        (_, terms), grads = jax.value_and_grad(self.loss, has_aux=True)(params, minibatch, clip_eps, ent_coef, hypers)
        if self.grad_axis is not None:
            grads = jax.lax.pmean(grads, self.grad_axis)
        updates, opt_state = tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), terms

    def loss(self, params, minibatch: Minibatch, clip_eps, ent_coef, hypers):
        """The PPO loss of a minibatch: `(total, its terms)`."""
        ppo, dist, traj = self.ppo, self.dist, minibatch.transitions
        logits, value = self.forward_minibatch(params, minibatch)
        terms = ppo_loss_terms(
            dist.log_prob(logits, traj.action, traj.mask), traj.log_prob, minibatch.advantages, value, traj.value,
            minibatch.returns, dist.entropy(logits, traj.action, traj.mask),
            clip_eps=clip_eps, vf_coef=hypers.vf_coef, ent_coef=ent_coef, clip_vloss=ppo.clip_vloss,
            normalize_advantages=ppo.normalize_advantages,
            entropy_floor=None if ppo.is_null("entropy_floor") else hypers.entropy_floor,
            entropy_floor_coef=hypers.entropy_floor_coef, value_loss=ppo.value_loss, weights=traj.weight,
        )
        return terms.total, terms

    def forward_minibatch(self, params, minibatch: Minibatch):
        """`(logits, values)` of a minibatch: of its steps (feed-forward), or of its env
        sequences [T, B] re-run from the state they started from (recurrent)."""
        traj = minibatch.transitions
        obs = obs_storage.load(traj.obs)  # the stored observations, as float for the network
        if minibatch.start_state is None:
            return self.network.apply(params, obs)
        _, logits, values = self.network.apply(params, obs, minibatch.start_state, traj.reset)
        return logits, values

    def update_metrics(self, traj: Transition, returns, terms, opt_state, sched: dict, value_norm) -> dict:
        """The update's row of metrics (means over the rollout, its episodes and the minibatches)."""
        metrics = rollout_metrics(traj, self.dist)
        metrics.update({f"train/{name}": jnp.mean(value) for name, value in terms._asdict().items() if name != "total"})
        metrics["train/explained_variance"] = explained_variance(traj.value, returns)
        metrics["train/learning_rate"] = current_learning_rate(opt_state).astype(jnp.float32)
        metrics.update({f"train/{name}": jnp.asarray(value, jnp.float32) for name, value in sched.items()})
        if self.grad_axis is not None:
            metrics = combine_across_devices(metrics, self.grad_axis)
        metrics = finish_episode_metrics(metrics)
        if value_norm is not None:
            metrics.update({"train/popart_mean": value_norm.mean, "train/popart_std": value_norm.std})
        return metrics


def make_trainer(ppo: PPOConfig, env, env_params, network, *, num_envs: int, chunk_updates: int,
                 grad_axis: str | None = None, keeps_policy_anchors: bool = False) -> Trainer:
    """Build one replica's trainer. `num_envs` is this replica's share of `ppo.num_envs`;
    `keeps_policy_anchors`: its state holds the policy's anchors (evaluation along training)."""
    dist = policies.for_env(env, env_params, network.cfg.squash)
    return Trainer(ppo=StaticPPO.of(ppo), env=env, env_params=env_params, network=network, num_envs=num_envs,
                   chunk_updates=chunk_updates, grad_axis=grad_axis, dist=dist, keeps_policy_anchors=keeps_policy_anchors,
                   **env_functions(env, env_params, num_envs, dist))


def env_functions(env, env_params, num_envs: int, dist) -> dict:
    """The trainer's batched env step and action mask under `env_params`."""
    return {"env_step": env_action_step(batched_step(env, env_params, num_envs), dist),
            "env_mask": batched_mask(env, env_params)}


def env_params_argument(env, env_params):
    """`env_params` as an argument of the lab's programs, leaves as float32 / int32 / bool arrays,
    for an env whose params are data (`Env.params_are_data`: every reward mode of such an env is
    then one program); None for any other env, whose params stay constants of its programs."""
    if not env.params_are_data:
        return None

    def leaf(x):
        if isinstance(x, (bool, np.bool_)):
            return np.asarray(x, np.bool_)
        if isinstance(x, (int, np.integer)):
            return np.asarray(x, np.int32)
        if isinstance(x, (float, np.floating)):
            return np.asarray(x, np.float32)
        return np.asarray(x)

    return jax.tree.map(leaf, env_params)


def env_action_step(env_step: Callable, dist) -> Callable:
    """`env_step` given the env's form of the policy's action (a Gaussian's sample clipped or
    squashed; a categorical's as it is): the trainer stores and scores the unclipped sample."""
    if not dist.continuous:
        return env_step
    return lambda key, env_state, action: env_step(key, env_state, dist.env_action(action))


def rollout_metrics(traj: Transition, dist) -> dict:
    """Sums and means over one rollout; episode means are finished after any device sum.
    `actions/*`: each discrete action's share, or each continuous dimension's mean and std."""
    done = traj.done.astype(jnp.float32)
    metrics = {
        "_episode_return_sum": jnp.sum(traj.finished_return),
        "_episode_length_sum": jnp.sum(traj.finished_length).astype(jnp.float32),
        "train/num_episodes": jnp.sum(done),
    }
    metrics.update(dist.action_metrics(traj.action, traj.mask))
    # NaN marks a step where an env metric is undefined (e.g. a rate over rare events).
    metrics.update({name: jnp.nanmean(value.astype(jnp.float32)) for name, value in traj.env_metrics.items()})
    if traj.obs_cast is not None:  # what storing the observations in ppo.rollout_obs_dtype lost
        frac, lowest, highest = traj.obs_cast
        metrics["train/obs_cast_lossy_frac"] = jnp.mean(frac)
        metrics["train/obs_cast_lossy_min"] = jnp.nanmin(lowest)
        metrics["train/obs_cast_lossy_max"] = jnp.nanmax(highest)
    return metrics


# The chunk's one health output, not a logged metric (the host takes it out of the rows): per
# update, 0.0 when everything was finite, else the sum of the flags below of what was not.
NONFINITE = "_nonfinite"
NONFINITE_LOSS, NONFINITE_GRADIENT, NONFINITE_STATE = 1, 2, 4


def all_finite(tree) -> jax.Array:
    """Whether every float in `tree` is finite, a scalar bool: whether the sum of them all is (an
    inf or NaN anywhere makes it inf or NaN; finite values sum past float32's 3e38 only where
    training has blown up anyway). One sum per leaf: less than half the time of a finiteness
    flag per leaf reduced to one (on a CartPole learner state on a CPU)."""
    sums = [jnp.sum(x, dtype=jnp.float32) for x in jax.tree.leaves(tree) if jnp.issubdtype(x.dtype, jnp.inexact)]
    return jnp.isfinite(sum(sums)) if sums else jnp.asarray(True)


def nonfinite_code(metrics: dict, state: LearnerState, grad_axis: str | None) -> jax.Array:
    """`NONFINITE` of one update, from what the update leaves, checked once (no check inside its
    minibatches: a per-minibatch reduction over every gradient was a tenth of a CartPole update
    at 4 envs on a CPU, docs/performance.md):
    - the loss: its terms' means over the minibatches (the metrics row has them: a mean is finite
      only where every minibatch's term was);
    - the gradients: Adam's moments. A non-finite gradient of any minibatch reaches them through
      the clipping (its global norm is then inf or NaN, which turns the clipped gradient into
      NaN) and NaN stays in a moving average, so the moments after the update are finite only
      where every minibatch's gradients were (or where a gradient's square overflowed the
      second moment: a blow-up too);
    - the state training reads again: parameters and normaliser statistics."""
    losses = [value for name, value in metrics.items() if name.startswith("train/") and name[6:] in LossTerms._fields]
    code = (NONFINITE_LOSS * jnp.logical_not(all_finite(losses))
            + NONFINITE_GRADIENT * jnp.logical_not(all_finite(state.opt_state))
            + NONFINITE_STATE * jnp.logical_not(all_finite((state.params, state.value_norm, state.reward_norm))))
    if grad_axis is not None:  # one seed over devices: non-finite if it is on any of them
        code = jax.lax.pmax(code, grad_axis)
    return code.astype(jnp.float32)


def pack_metrics(metrics: dict):
    """An update's metrics as one float32 vector, its tree and its leaves' (shape, dtype): the
    chunk's scan then stacks one output per update instead of one per metric (each a kernel an
    update on a CPU, about 20 of them). Exact: every metric is a float32 or a small integer."""
    leaves, tree = jax.tree.flatten(metrics)
    packed = jnp.concatenate([jnp.ravel(x).astype(jnp.float32) for x in leaves])
    return packed, tree, [(x.shape, x.dtype) for x in leaves]


def unpack_metrics(packed, tree, leaves) -> dict:
    """`pack_metrics`'s vectors stacked over updates ([K, n]) back into the metrics ([K, ...] each)."""
    out, start = [], 0
    for shape, dtype in leaves:
        size = int(np.prod(shape, dtype=np.int64))
        out.append(packed[:, start:start + size].reshape((packed.shape[0], *shape)).astype(dtype))
        start += size
    return jax.tree.unflatten(tree, out)


def combine_across_devices(metrics: dict, axis: str) -> dict:
    """One seed split over devices: add up the counts, average everything else."""
    summed = ("_episode_return_sum", "_episode_length_sum", "train/num_episodes")
    return {k: jax.lax.psum(v, axis) if k in summed else jax.lax.pmean(v, axis) for k, v in metrics.items()}


def finish_episode_metrics(metrics: dict) -> dict:
    n = metrics["train/num_episodes"]
    safe = jnp.maximum(n, 1.0)
    metrics["train/mean_episode_return"] = jnp.where(n > 0, metrics.pop("_episode_return_sum") / safe, jnp.nan)
    metrics["train/mean_episode_length"] = jnp.where(n > 0, metrics.pop("_episode_length_sum") / safe, jnp.nan)
    return metrics
