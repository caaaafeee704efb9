"""A trained policy as an MLflow pyfunc model: observations in, greedy actions out
(argmax, or a Gaussian policy's mean clipped or squashed into the action bounds).

    import mlflow
    mlflow.set_tracking_uri("sqlite:///outputs/mlflow/mlflow.db")
    policy = mlflow.pyfunc.load_model("models:/ppo_lab-cartpole/1")
    actions = policy.predict(obs_batch)          # [N, *obs_shape] -> int64 [N]

A recurrent policy (`network.recurrent=gru|lstm`) takes and returns its recurrent state: one
float32 row of `state_size` numbers per env (the cell's state flattened; the model's metadata
says `recurrent` and `state_size`), zeros at an episode's start:

    state = np.zeros((n, policy.metadata.metadata["state_size"]), np.float32)
    out = policy.predict({"obs": obs_batch, "state": state})   # {"action": int64 [N], "state": float32 [N, S]}
    state = out["state"]                                        # feed back in on the next step;
    state[episode_ended] = 0                                    # zero an env's row where its episode ended

The model folder holds the run's `config.yaml` and one seed's network parameters, cut out of
the run's final checkpoint (the checkpoint stacks every vmapped seed and carries the optimizer
and env state, none of which acting needs). Loading rebuilds the env (for its observation
shape) and the network from that config, so `ppo_lab` and its dependencies must be installed
where the model is loaded; the model's `requirements.txt` pins the versions it was saved with.
The code is logged as "models from code" (`mlflow_policy_code.py`), not pickled.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import flax.serialization
import jax
import jax.numpy as jnp
import mlflow
import numpy as np
from mlflow.models import ModelSignature
from mlflow.pyfunc import PythonModel
from mlflow.types import Schema, TensorSpec
from omegaconf import OmegaConf

from ppo_lab.config import validate
from ppo_lab.ppo.policies import for_env
from ppo_lab.ppo.rollout import action_policy
from ppo_lab.run.build import build_env_and_network
from ppo_lab.run.manifest import package_versions

CODE_FILE = Path(__file__).with_name("mlflow_policy_code.py")
REQUIREMENTS = ("jax", "jaxlib", "flax", "optax", "gymnax", "six", "omegaconf", "numpy")


def seed_params_from_checkpoint(checkpoint_msgpack: Path, replica: int) -> bytes:
    """One replica's network parameters from a checkpoint file, as flax msgpack bytes."""
    params = flax.serialization.msgpack_restore(Path(checkpoint_msgpack).read_bytes())["params"]
    return flax.serialization.msgpack_serialize(jax.tree.map(lambda x: np.asarray(x)[replica], params))


class GreedyPolicy:
    """Argmax actions of a network rebuilt from a run config and one seed's parameters; a
    recurrent one also maps (observations, state) to (actions, next state)."""

    def __init__(self, config: dict, params_msgpack: bytes):
        cfg = validate(config, saved=True)  # the run's config as saved with the model
        env, env_params, network, self.action_names = build_env_and_network(cfg)
        self.obs_shape = tuple(env.observation_space(env_params).shape)
        self.num_actions = len(self.action_names)
        # Discrete: int64 action indices; continuous: float32 actions [N, D], the Gaussian's mean
        # clipped (or squashed) into the bounds, as evaluation plays it. Observation
        # normalisation is inside the network (its statistics are parameters).
        self.dist = for_env(env, env_params, cfg.network.squash)
        self.action_dtype = np.float32 if self.dist.continuous else np.int64
        template = network.init_params(jax.random.PRNGKey(0), np.zeros((1, *self.obs_shape), np.float32))
        params = flax.serialization.from_state_dict(template, flax.serialization.msgpack_restore(params_msgpack))
        act = action_policy(network, params, deterministic=True, dist=self.dist)  # the evaluation's greedy policy
        self.recurrent = network.cfg.recurrent  # None, "gru" or "lstm"
        if self.recurrent is None:
            self.state_size = 0
            self._act = jax.jit(lambda obs: act(obs, None)[0])
            return
        # The cell's state pytree <-> one flat float32 row per env.
        template = network.initial_carry(1)
        self._treedef = jax.tree.structure(template)
        self._sizes = [leaf.shape[-1] for leaf in jax.tree.leaves(template)]
        self.state_size = sum(self._sizes)
        no_reset = lambda obs: np.zeros(obs.shape[:1], bool)  # noqa: E731 - the caller zeroes rows at episode ends

        def step(obs, flat):
            carry = jax.tree.unflatten(self._treedef, jnp.split(flat, np.cumsum(self._sizes)[:-1], axis=-1))
            actions, _, carry = act(obs, None, None, (carry, no_reset(obs)))
            return actions, jnp.concatenate(jax.tree.leaves(carry), axis=-1)

        self._step = jax.jit(step)

    def _batch(self, obs):
        obs = np.asarray(obs, dtype=np.float32)
        single = obs.shape == self.obs_shape
        if single:
            obs = obs[None]
        if obs.shape[1:] != self.obs_shape:
            raise ValueError(f"observations of shape {obs.shape[1:]} (batch {obs.shape[:1]}); this policy takes {self.obs_shape}")
        return obs, single

    def __call__(self, obs, state=None):
        """Feed-forward: actions. Recurrent: `(actions, next_state)` from `state` ([N,
        state_size]; None: zeros, every env at an episode's start)."""
        obs, single = self._batch(obs)
        if self.recurrent is None:
            actions = np.asarray(self._act(obs), dtype=self.action_dtype)
            return actions[0] if single else actions
        state = np.zeros((obs.shape[0], self.state_size), np.float32) if state is None else np.asarray(state, np.float32)
        state = state[None] if single and state.ndim == 1 else state
        if state.shape != (obs.shape[0], self.state_size):
            raise ValueError(f"a state of shape {state.shape}; this policy takes [{obs.shape[0]}, {self.state_size}] (zeros at an episode's start)")
        actions, state = self._step(obs, state)
        actions, state = np.asarray(actions, self.action_dtype), np.asarray(state, np.float32)
        return (actions[0], state[0]) if single else (actions, state)

    @classmethod
    def from_files(cls, config_yaml: Path, params_msgpack: Path) -> "GreedyPolicy":
        config = OmegaConf.to_container(OmegaConf.load(config_yaml), resolve=True)
        return cls(config, Path(params_msgpack).read_bytes())


class PolicyModel(PythonModel):
    """The pyfunc wrapper: `predict(obs_batch)` returns one int64 action per observation; a
    recurrent policy's `predict({"obs": obs_batch, "state": state})` returns
    `{"action": actions, "state": next_state}` (see the module docstring)."""

    def load_context(self, context):
        self.policy = GreedyPolicy.from_files(context.artifacts["config"], context.artifacts["params"])

    def predict(self, context, model_input: np.ndarray, params=None):
        if self.policy.recurrent is not None:
            if not isinstance(model_input, dict):
                model_input = {"obs": model_input}  # observations alone: every env at an episode's start
            actions, state = self.policy(model_input["obs"], model_input.get("state"))
            return {"action": actions, "state": state}
        if hasattr(model_input, "to_numpy"):  # a DataFrame of flat observations
            model_input = model_input.to_numpy()
        return self.policy(model_input)


def _requirements() -> list[str]:
    """The model's pins: the versions it was saved with (a package not installed: its name)."""
    versions = package_versions(REQUIREMENTS)
    return [f"mlflow=={mlflow.__version__}", *(f"{n}=={versions[n]}" if n in versions else n for n in REQUIREMENTS)]


def save_policy_model(path: Path, config_yaml: Path, params_msgpack: Path, metadata: dict) -> GreedyPolicy:
    """Write the pyfunc model folder at `path`; returns the policy it loads (checked to act)."""
    policy = GreedyPolicy.from_files(config_yaml, params_msgpack)
    probe = np.zeros((2, *policy.obs_shape), np.float32)
    actions = policy(probe) if policy.recurrent is None else policy(probe)[0]
    if policy.dist.continuous:
        low, high = (np.asarray(policy.dist.env_action(np.full((policy.num_actions,), x, np.float32))) for x in (-np.inf, np.inf))
        broken = actions.shape != (2, policy.num_actions) or not np.all((low - 1e-6 <= actions) & (actions <= high + 1e-6))
    else:
        broken = actions.shape != (2,) or not ((0 <= actions) & (actions < policy.num_actions)).all()
    if broken:
        raise RuntimeError(f"the policy rebuilt from {params_msgpack} returned {actions!r} for a batch of 2 observations")
    obs_spec = TensorSpec(np.dtype(np.float32), (-1, *policy.obs_shape))
    action_shape = (-1, policy.num_actions) if policy.dist.continuous else (-1,)
    action_spec = TensorSpec(np.dtype(policy.action_dtype), action_shape)
    if policy.recurrent is None:
        signature = ModelSignature(inputs=Schema([obs_spec]), outputs=Schema([action_spec]))
    else:
        state_spec = TensorSpec(np.dtype(np.float32), (-1, policy.state_size), "state")
        signature = ModelSignature(inputs=Schema([TensorSpec(np.dtype(np.float32), (-1, *policy.obs_shape), "obs"), state_spec]),
                                   outputs=Schema([TensorSpec(np.dtype(policy.action_dtype), action_shape, "action"), state_spec]))
        metadata = {**metadata, "recurrent": policy.recurrent, "state_size": policy.state_size}
    with warnings.catch_warnings():  # "no input example": the signature above says what it takes
        warnings.simplefilter("ignore", UserWarning)
        mlflow.pyfunc.save_model(
            path, python_model=str(CODE_FILE), artifacts={"config": str(config_yaml), "params": str(params_msgpack)},
            signature=signature, pip_requirements=_requirements(), metadata=metadata,
        )
    return policy
