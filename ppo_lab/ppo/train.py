"""The pure PPO trainer: one jitted chunk of K updates, vmapped over replicas.

Per replica (one seed, or one device's share of a seed's envs) training is a pure function
of a PRNG key, built PureJaxRL-style from nested `lax.scan`s: updates -> rollout steps, and
epochs -> minibatches. The host calls `train_chunk` repeatedly and logs, checkpoints and
checks stop conditions between chunks (the HackMatrix idea: jit a chunk, not the run).

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

from typing import Any, Callable, NamedTuple

import flax.struct
import jax
import jax.numpy as jnp
import optax

from ppo_lab.config import PPOConfig
from ppo_lab.ppo.gae import compute_gae
from ppo_lab.ppo import normalize, policies
from ppo_lab.ppo.losses import explained_variance, ppo_loss_terms
from ppo_lab.ppo.hypers import Hypers
from ppo_lab.ppo import obs_storage
from ppo_lab.ppo.rollout import Rollout, Step, batched_mask, batched_reset, batched_step, initial_memory, rollout
from ppo_lab.ppo import value_norm as vn
from ppo_lab.ppo.grad_clip import clip_policy_and_value
from ppo_lab.ppo.schedules import learning_rate_schedule, schedule_values


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


def make_optimizer(ppo: PPOConfig, num_updates: int, hypers: Hypers | None = None) -> optax.GradientTransformation:
    """Adam with clipping and the learning-rate schedule; `hypers`: a replica's traced
    hyperparameters (ppo/hypers.py; None: `ppo`'s own, as constants). Pure functions either
    way: built inside the chunk, it closes over that replica's values; the state's structure
    never depends on them."""
    hypers = Hypers.of(ppo) if hypers is None else hypers
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


class Trainer(NamedTuple):
    # Each takes a last, optional `hypers`: the replica's traced hyperparameters (ppo/hypers.py;
    # None: the config's own, as constants of the program).
    init: Callable  # (key, env_key, hypers=None) -> LearnerState, one replica
    rollout: Callable  # (state, hypers=None) -> ppo.rollout.Rollout of Transitions (the update's first half), one replica
    chunk: Callable  # (state, start_update, hypers=None) -> (state, metrics[K]), one replica
    num_updates: int
    chunk_updates: int  # K: updates per call of `chunk`


def make_trainer(
    ppo: PPOConfig,
    env,
    env_params,
    network,
    *,
    num_envs: int,
    chunk_updates: int,
    grad_axis: str | None = None,
) -> Trainer:
    """Build the per-replica functions. `num_envs` is this replica's share of `ppo.num_envs`."""
    num_updates = ppo.num_updates
    # The policy's distribution: categorical or diagonal Gaussian, by the env's action space.
    dist = policies.for_env(env, env_params, network.cfg.squash)
    batch_size = num_envs * ppo.num_steps
    minibatch_size = batch_size // ppo.num_minibatches
    own_hypers = Hypers.of(ppo)
    env_step = env_action_step(batched_step(env, env_params, num_envs), dist)
    # An env with `action_mask(state, params)`: masked sampling, log-probs and entropy.
    env_mask = batched_mask(env, env_params)
    # A privileged critic: the policy sees the first N channels, the critic all of them.
    actor_channels = getattr(network, "actor_obs_channels", None)
    # The critic's channels of the stored observation taken after the step (the reference's).
    critic_after_step = ppo.privileged_view_after_step and actor_channels is not None

    def init(param_key, env_key, hypers=None) -> LearnerState:
        tx = make_optimizer(ppo, num_updates, hypers)
        obs, env_state = batched_reset(env, env_params, env_key, num_envs)
        params = network.init_params(param_key, obs[:1])
        zeros = jnp.zeros((num_envs,), jnp.float32)
        return LearnerState(
            params=params,
            opt_state=tx.init(params),
            env_state=env_state,
            obs=obs,
            episode_return=zeros,
            episode_length=zeros.astype(jnp.int32),
            key=jax.random.fold_in(env_key, 1),
            value_norm=vn.init() if ppo.value_norm == "popart" else None,
            memory=initial_memory(network, num_envs),
            reward_norm=normalize.init_reward_norm(num_envs) if ppo.normalize_reward else None,
        )

    def collect(state: LearnerState, hypers=None) -> Rollout:
        """One rollout of `ppo.num_steps` steps with the sampled policy: the transitions, and
        the running episode counters carried over.

        With `ppo.bootstrap_truncation` (a time limit is not a terminal state: a step cut short
        by the limit is credited gamma x the value of its final observation) the value of step
        t's final observation is computed in step t+1's forward pass, stacked with step t+1's
        observations (`ActorCritic.with_extra_values`), and added to step t's reward after the
        loop; the last step's comes from one extra pass. One network call per step instead of
        two: the second call was 11% of a CartPole update at 4 envs on a CPU, and 36% of the
        reference CNN's rollout on an H100 (docs/performance.md)."""
        hypers = own_hypers if hypers is None else hypers
        params = state.params
        read = lambda value: vn.read(state.value_norm, value)  # noqa: E731

        def policy(obs, key, mask, memory=None):
            previous_final_obs = None
            if ppo.bootstrap_truncation:
                obs, previous_final_obs = obs
            recurrent_state, out, value, previous_final_value = forward_step(params, obs, memory, previous_final_obs)
            action = dist.sample(key, out, mask)
            extras = (dist.log_prob(out, action, mask), read(value), previous_final_value,
                      None if memory is None else memory[1])
            if memory is None:
                return action, extras
            return action, extras, recurrent_state

        def record(counters, step: Step):
            ep_return, ep_length = counters
            reward = step.reward.astype(jnp.float32)
            done = jnp.logical_or(step.terminated, step.truncated)
            # A reset step (EnvPool's, `info["resetting"]`) belongs to no episode: it starts the
            # counters afresh (an episode cut off by a resume's new envs is dropped, not counted).
            resetting = step.info.get("resetting")
            if resetting is not None:
                ep_return, ep_length = jnp.where(resetting, 0.0, ep_return), jnp.where(resetting, -1, ep_length)
            ep_return = ep_return + reward
            ep_length = ep_length + 1
            log_prob, value, previous_final_value, reset = step.extras
            obs = step.obs[0] if ppo.bootstrap_truncation else step.obs
            next_obs = step.next_obs[0] if ppo.bootstrap_truncation else step.next_obs
            stored = obs_storage.store(obs, ppo.rollout_obs_dtype, actor_channels,
                                       critic_from=next_obs if critic_after_step else None)
            cast = None if ppo.rollout_obs_dtype == "float32" else obs_storage.cast_stats(obs, stored, actor_channels)
            transition = Transition(
                obs=stored,
                action=step.action,
                log_prob=log_prob,
                value=value,
                reward=reward,
                done=done,
                finished_return=jnp.where(done, ep_return, 0.0),
                finished_length=jnp.where(done, ep_length, 0),
                env_metrics=step.info.get("metrics", {}),
                mask=step.mask,
                obs_cast=cast,
                reset=reset,
                weight=None if resetting is None else 1.0 - resetting.astype(jnp.float32),
            )
            cut_short = jnp.logical_and(step.truncated, jnp.logical_not(step.terminated))
            return (jnp.where(done, 0.0, ep_return), jnp.where(done, 0, ep_length)), (transition, cut_short, previous_final_value)

        counters = (state.episode_return, state.episode_length)
        if not ppo.bootstrap_truncation:
            out = rollout(env_step, policy, state.env_state, state.obs, state.key, ppo.num_steps, record=record,
                          stats=counters, action_mask=env_mask, memory=state.memory)
            traj, reward_norm = scale_rewards(state, out.records[0], hypers)
            return out._replace(records=traj, stats=(*out.stats, reward_norm))
        # The carried observation is the pair (observation, previous step's final observation);
        # before the first step there is no previous step, and its value is dropped.
        out = rollout(keep_final_observation, policy, state.env_state, (state.obs, state.obs), state.key, ppo.num_steps,
                      record=record, stats=counters, action_mask=env_mask, memory=state.memory)
        traj, cut_short, previous_final_value = out.records
        obs, last_final_obs = out.obs
        # The last step's final observations continue its episodes: the state is not reset.
        no_reset = None if out.memory is None else (out.memory[0], jnp.zeros_like(out.memory[1]))
        last_final_value = state_value(params, last_final_obs, no_reset)
        final_value = jnp.concatenate([previous_final_value[1:], last_final_value[None]])
        bootstrap = hypers.gamma * jax.lax.stop_gradient(read(final_value)) * cut_short
        traj, reward_norm = scale_rewards(state, traj, hypers)  # the env's rewards; the bootstrap is a value, already scaled
        return out._replace(obs=obs, records=traj._replace(reward=traj.reward + bootstrap), stats=(*out.stats, reward_norm))

    def scale_rewards(state: LearnerState, traj: Transition, hypers):
        """`ppo.normalize_reward`: the rollout's rewards over the running std of the discounted
        return (the statistics moved by this rollout); unchanged otherwise."""
        if state.reward_norm is None:
            return traj, None
        reward, reward_norm = normalize.scale_rewards(state.reward_norm, traj.reward, traj.done, hypers.gamma, grad_axis)
        return traj._replace(reward=reward), reward_norm

    def forward_step(params, obs, memory, extra_obs=None):
        """One step of the network on a batch: `(recurrent state or None, logits, values,
        values of extra_obs or None)`; a recurrent network starts from `memory`."""
        if memory is None:
            if extra_obs is None:
                return (None, *network.apply(params, obs), None)
            return (None, *network.apply(params, obs, extra_obs, method="with_extra_values"))
        if extra_obs is None:
            return (*network.apply(params, obs, *memory, method="step"), None)
        return network.apply(params, obs, *memory, extra_obs, method="step_with_extra_values")

    def state_value(params, obs, memory):
        """The values of a batch of observations (a recurrent network: one step from `memory`)."""
        if memory is None:
            return network.apply(params, obs, method="value")
        return network.apply(params, obs, *memory, method="step_value")

    def forward_batch(params, traj: Transition, start_state):
        """`(logits, values)` of a minibatch: of its steps (feed-forward), or of its env
        sequences [T, B] re-run from the state they started from (recurrent)."""
        obs = obs_storage.load(traj.obs)  # the stored observations, as float for the network
        if start_state is None:
            return network.apply(params, obs)
        _, logits, values = network.apply(params, obs, start_state, traj.reset)
        return logits, values

    def keep_final_observation(key, env_state, action):
        """`env_step` whose observation is the pair (next observation, final observation)."""
        obs, env_state, reward, terminated, truncated, info = env_step(key, env_state, action)
        return (obs, info["final_observation"]), env_state, reward, terminated, truncated, info

    def loss_fn(params, minibatch, clip_eps, ent_coef, hypers):
        traj, advantages, returns, start_state = minibatch
        logits, value = forward_batch(params, traj, start_state)
        terms = ppo_loss_terms(
            dist.log_prob(logits, traj.action, traj.mask),
            traj.log_prob,
            advantages,
            value,
            traj.value,
            returns,
            dist.entropy(logits, traj.action, traj.mask),
            clip_eps=clip_eps,
            vf_coef=hypers.vf_coef,
            ent_coef=ent_coef,
            clip_vloss=ppo.clip_vloss,
            normalize_advantages=ppo.normalize_advantages,
            entropy_floor=None if ppo.entropy_floor is None else hypers.entropy_floor,
            entropy_floor_coef=hypers.entropy_floor_coef,
            value_loss=ppo.value_loss,
            weights=traj.weight,
        )
        return terms.total, terms

    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    def shuffle(key, batch):
        """Minibatches [num_minibatches, ...] of the batch: shuffled steps (feed-forward), or
        whole env sequences shuffled over envs, time kept in order (recurrent: the batch is
        [T, B] with the start state [B], and each minibatch has B / num_minibatches envs)."""
        traj, _, _, start_state = batch
        if start_state is None:
            permutation = jax.random.permutation(key, batch_size)
            return jax.tree.map(lambda x: x[permutation].reshape((ppo.num_minibatches, minibatch_size) + x.shape[1:]), batch)
        envs = jax.random.permutation(key, num_envs).reshape(ppo.num_minibatches, -1)  # [M, B / M]
        sequences = jax.tree.map(lambda x: jnp.moveaxis(x[:, envs], 1, 0), batch[:3])  # [M, T, B / M, ...]
        return (*sequences, jax.tree.map(lambda x: x[envs], start_state))

    def epoch(carry, _, batch, clip_eps, ent_coef, hypers, tx):
        params, opt_state, key = carry
        key, perm_key = jax.random.split(key)
        minibatches = shuffle(perm_key, batch)

        def minibatch_step(carry, minibatch):
            params, opt_state = carry
            (_, terms), grads = grad_fn(params, minibatch, clip_eps, ent_coef, hypers)
            if grad_axis is not None:
                grads = jax.lax.pmean(grads, grad_axis)
            updates, opt_state = tx.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), terms

        (params, opt_state), terms = jax.lax.scan(minibatch_step, (params, opt_state), minibatches)
        return (params, opt_state, key), terms

    def update(state: LearnerState, update_index, hypers):
        tx = make_optimizer(ppo, num_updates, hypers)
        sched = schedule_values(ppo, update_index, num_updates, hypers)
        params = state.params
        env_state, obs, (ep_return, ep_length, reward_norm), key, traj, memory = collect(state, hypers)

        last_value = vn.read(state.value_norm, state_value(params, obs, memory))
        advantages, returns = compute_gae(traj.reward, traj.value, traj.done, last_value, hypers.gamma, None,
                                          gamma_lambda=hypers.gamma_lambda)
        params, opt_state, value_norm, fit_returns, fit_values = value_targets(state, params, returns, traj.value)

        batch = (traj._replace(value=fit_values, env_metrics={}, obs_cast=None), advantages, fit_returns)
        if memory is None:
            flatten = lambda x: x.reshape((batch_size,) + x.shape[2:])  # noqa: E731
            batch = (*jax.tree.map(flatten, batch), None)
        else:  # whole sequences from the state each env started the rollout in
            batch = (*batch, state.memory[0])
        (params, opt_state, key), terms = jax.lax.scan(
            lambda c, x: epoch(c, x, batch, sched["clip_eps"], sched["ent_coef"], hypers, tx),
            (params, opt_state, key),
            None,
            ppo.update_epochs,
        )

        if ppo.normalize_obs:  # after the epochs: they saw the statistics the rollout saw
            params = normalize.update_obs_norm(params, obs_storage.load(traj.obs), grad_axis)
        metrics = rollout_metrics(traj, dist)
        metrics.update({f"train/{name}": jnp.mean(value) for name, value in terms._asdict().items() if name != "total"})
        metrics["train/explained_variance"] = explained_variance(traj.value, returns)
        metrics["train/learning_rate"] = current_learning_rate(opt_state).astype(jnp.float32)
        metrics.update({f"train/{name}": jnp.asarray(value, jnp.float32) for name, value in sched.items()})
        if grad_axis is not None:
            metrics = combine_across_devices(metrics, grad_axis)
        metrics = finish_episode_metrics(metrics)
        if value_norm is not None:
            metrics.update({"train/popart_mean": value_norm.mean, "train/popart_std": value_norm.std})
        new_state = LearnerState(params, opt_state, env_state, obs, ep_return, ep_length, key, value_norm, memory,
                                 reward_norm)
        return new_state, metrics

    def value_targets(state: LearnerState, params, returns, values):
        """The value loss's targets: returns and old values as they are, or, with PopArt, in the
        units of statistics moved toward this batch (the head and its Adam moments rescaled so
        its outputs in return units stay put)."""
        if state.value_norm is None:
            return params, state.opt_state, None, returns, values
        stats, params, opt_state, returns, values = vn.refit(state.value_norm, params, state.opt_state, returns, values,
                                                             ppo.popart_beta_min, axis_name=grad_axis)
        return params, opt_state, stats, returns, values

    def chunk(state: LearnerState, start_update, hypers=None):
        """K updates in one scan; updates past `num_updates` are skipped (a cheap cond:
        `start_update` is the same for every replica, so the predicate is not batched)."""
        hypers = own_hypers if hypers is None else hypers

        def body(state, offset):
            index = start_update + offset
            return jax.lax.cond(index < num_updates, update, skip, state, index, hypers)

        return jax.lax.scan(body, state, jnp.arange(chunk_updates))

    def skip(state, index, hypers):
        # Same outputs as `update` (lax.cond needs matching branches), metrics all NaN.
        shapes = jax.eval_shape(update, state, index, hypers)[1]
        return state, jax.tree.map(lambda s: jnp.full(s.shape, jnp.nan, s.dtype), shapes)

    return Trainer(init=init, rollout=collect, chunk=chunk, num_updates=num_updates, chunk_updates=chunk_updates)


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
