"""A lab config in PureJaxRL's keys: what its `ppo.py` / `ppo_continuous_action.py` can be told,
what it cannot (refused, naming the lab's key), and what differs either way (named).

PureJaxRL's trainer takes a flat dict (NUM_ENVS, LR, ...); the rest of its choices are written
into its code: a clipped value loss (0.5 x mean of the max), Adam's epsilon 1e-5, advantages
normalised per minibatch, one global gradient-norm clip, a learning rate annealed to 0 or kept,
constant entropy and clip coefficients, a gymnax env at its default params, float32. A lab
setting off those is refused (`Unexpressible`), since the two would not be training alike.

Its network is written in too (`ppo.py`: separate 64-64 actor and critic; the continuous file:
256-256 and a state-independent log-std; both `ACTIVATION` relu or else tanh): a preset whose
network differs is not refused, it is compared twice, the lab also run at PureJaxRL's network
(`peer_network_overrides`, named in `network_differences`).

The other way round, `lab_overrides` writes a PureJaxRL config in the lab's keys: PureJaxRL's
own CartPole settings (`CARTPOLE`) are what the performance suite's side by side runs both
sides at.

Nothing here imports jax: the config is checked before any backend starts.
"""

from __future__ import annotations

from ppo_lab.config import PRECISIONS
from ppo_lab.launching.command_line import override_text
from ppo_lab.ppo.autoscale import scaled_minibatches_and_epochs

# PureJaxRL's published CartPole settings (the `__main__` block of its ppo.py).
CARTPOLE = {
    "LR": 2.5e-4, "NUM_ENVS": 4, "NUM_STEPS": 128, "TOTAL_TIMESTEPS": 5e5, "UPDATE_EPOCHS": 4,
    "NUM_MINIBATCHES": 4, "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01,
    "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5, "ACTIVATION": "tanh", "ENV_NAME": "CartPole-v1",
    "ANNEAL_LR": True, "DEBUG": False,
}

# PureJaxRL's config keys that are a lab key each, both ways (`peer_config`, `lab_overrides`);
# the epochs and minibatches after the lab's auto-scaling, its activation as its network reads it.
PEER_KEYS = {
    "NUM_ENVS": "ppo.num_envs", "NUM_STEPS": "ppo.num_steps", "TOTAL_TIMESTEPS": "ppo.total_timesteps",
    "UPDATE_EPOCHS": "ppo.update_epochs", "NUM_MINIBATCHES": "ppo.num_minibatches", "GAMMA": "ppo.gamma",
    "GAE_LAMBDA": "ppo.gae_lambda", "CLIP_EPS": "ppo.clip_eps", "ENT_COEF": "ppo.ent_coef_initial",
    "VF_COEF": "ppo.vf_coef", "MAX_GRAD_NORM": "ppo.max_grad_norm", "LR": "ppo.lr", "ANNEAL_LR": "ppo.anneal_lr",
    "ENV_NAME": "env.gymnax_id",
}

# Lab keys PureJaxRL's code fixes, at the value it fixes them to.
FIXED = {
    "ppo.clip_vloss": True, "ppo.value_loss": "mean_of_max", "ppo.value_norm": None, "ppo.adam_eps": 1e-5,
    "ppo.normalize_advantages": True, "ppo.separate_grad_clip": False, "ppo.entropy_floor": None,
    "ppo.rollout_obs_dtype": "float32", "network.recurrent": None, "network.privileged_critic": False,
    "hardware.precision": PRECISIONS[0], "pbt.population": 0, "reward.name": "default",
    # The lab may stop a run early; PureJaxRL's training is one scan of a fixed length.
    "train.target_return": None, "train.duration_min": None,
}

# PureJaxRL's hard-coded network in the lab's keys (its ACTIVATION is added from the preset).
PEER_NETWORK = {
    False: {"network.kind": "mlp", "network.hidden_sizes": [64, 64], "network.shared_torso": False,
            "network.head_hidden": 0},
    True: {"network.kind": "mlp", "network.hidden_sizes": [256, 256], "network.shared_torso": False,
           "network.head_hidden": 0, "network.squash": None},
}
PEER_ACTIVATIONS = ("relu", "tanh")  # any other ACTIVATION is tanh in its code

# Named in every comparison: how PureJaxRL trains differently where the config cannot say.
ALWAYS_DIFFERENT = {
    "ppo.bootstrap_truncation": "PureJaxRL ends the episode for GAE at a time-limit cut (gymnax's "
                                "`done` = terminated or truncated); the lab adds gamma * V(final obs) there",
}
CONTINUOUS_NORMALISATION = ("PureJaxRL's normalisation wrappers move their statistics every env step; the lab's once "
                            "per update (ppo_lab/ppo/normalize.py)")


class Unexpressible(ValueError):
    """A lab setting PureJaxRL's trainer cannot be given; the message names the lab's key."""

    def __init__(self, key: str, value, why: str):
        self.key = key
        super().__init__(f"{key}={value!r}: {why}")


MISSING = object()


def get(cfg: dict, dotted: str, default=None):
    node = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def effective_minibatches_and_epochs(ppo: dict) -> tuple[int, int]:
    """What the lab trains with after its auto-scaling rule (`ppo.auto_scale`)."""
    if not ppo["auto_scale"]:
        return ppo["num_minibatches"], ppo["update_epochs"]
    return scaled_minibatches_and_epochs(ppo["num_envs"] * ppo["num_steps"], ppo["num_minibatches"], ppo["update_epochs"],
                                         ppo["auto_scale_epoch_floor"], reference_batch=ppo["auto_scale_reference_batch"])


def check_expressible(cfg: dict, continuous: bool) -> None:
    """Unexpressible for the first lab setting PureJaxRL's file has no way to take."""
    if not str(get(cfg, "env._target_") or "").startswith("ppo_lab.envs.gymnax_envs."):
        raise Unexpressible("env", get(cfg, "env.name"), "PureJaxRL's ppo.py takes a gymnax env by id (env=gymnax or env=cartpole)")
    if get(cfg, "env.params"):
        raise Unexpressible("env.params", get(cfg, "env.params"), "PureJaxRL makes the env at its default params")
    for key, fixed in FIXED.items():
        value = get(cfg, key, MISSING)  # missing: a run's config from before the key, so without what it adds
        if value is not MISSING and value != fixed and not (fixed is None and value == 0):
            raise Unexpressible(key, value, f"PureJaxRL's code fixes it at {fixed!r}")
    ppo = cfg["ppo"]
    if ppo["anneal_lr"] and ppo["lr_final"] != 0:
        raise Unexpressible("ppo.lr_final", ppo["lr_final"], "PureJaxRL's ANNEAL_LR anneals the learning rate to 0")
    if ppo["ent_coef_final"] != ppo["ent_coef_initial"]:
        raise Unexpressible("ppo.ent_coef_final", ppo["ent_coef_final"], "PureJaxRL's ENT_COEF is a constant")
    if ppo["clip_eps_final"] != ppo["clip_eps"]:
        raise Unexpressible("ppo.clip_eps_final", ppo["clip_eps_final"], "PureJaxRL's CLIP_EPS is a constant")
    if continuous and ppo["normalize_obs"] != ppo["normalize_reward"]:
        raise Unexpressible("ppo.normalize_reward", ppo["normalize_reward"],
                            "PureJaxRL's NORMALIZE_ENV normalises observations and rewards together or neither")
    if not continuous:
        for key in ("normalize_obs", "normalize_reward"):
            if ppo[key]:
                raise Unexpressible(f"ppo.{key}", True, "PureJaxRL's ppo.py has no normalisation")


def peer_config(cfg: dict, continuous: bool) -> dict:
    """The lab config `cfg` (resolved) as PureJaxRL's config dict; Unexpressible where it cannot be."""
    check_expressible(cfg, continuous)
    ppo = cfg["ppo"]
    minibatches, epochs = effective_minibatches_and_epochs(ppo)
    config = {peer: get(cfg, lab) for peer, lab in PEER_KEYS.items()}
    config.update(TOTAL_TIMESTEPS=int(ppo["total_timesteps"]), UPDATE_EPOCHS=epochs, NUM_MINIBATCHES=minibatches,
                  ANNEAL_LR=bool(ppo["anneal_lr"]), ACTIVATION=peer_network(cfg, continuous)["network.activation"],
                  DEBUG=False)
    if continuous:
        config["NORMALIZE_ENV"] = bool(ppo["normalize_obs"])
    return config


def peer_network(cfg: dict, continuous: bool) -> dict:
    """PureJaxRL's network in the lab's dotted keys, at the activation it will use for `cfg`."""
    activation = cfg["network"]["activation"]
    return {**PEER_NETWORK[continuous], "network.activation": activation if activation in PEER_ACTIVATIONS else "tanh"}


def network_differences(cfg: dict, continuous: bool) -> dict:
    """{lab key: (preset's value, PureJaxRL's)} where the preset's network is not PureJaxRL's."""
    return {key: (get(cfg, key), value) for key, value in peer_network(cfg, continuous).items() if get(cfg, key) != value}


def peer_network_overrides(cfg: dict, continuous: bool) -> list[str]:
    """Hydra overrides that put the lab on PureJaxRL's network (`network=mlp` first: a CNN preset's keys go)."""
    return ["network=mlp", *(f"{key}={override_text(value)}" for key, value in peer_network(cfg, continuous).items()
                             if key != "network.kind")]


def lab_overrides(config: dict) -> list[str]:
    """PureJaxRL's `ppo.py` config in the lab's keys, its network and constant coefficients
    included: the Hydra overrides under which the lab trains as PureJaxRL does at `config`
    (`peer_config` maps them back), but for a time-limit cut (`ALWAYS_DIFFERENT`)."""
    keys = {lab: config[peer] for peer, lab in PEER_KEYS.items()}
    keys.update({"ppo.total_timesteps": int(config["TOTAL_TIMESTEPS"]), "ppo.auto_scale": False,
                 "ppo.clip_eps_final": config["CLIP_EPS"], "ppo.ent_coef_final": config["ENT_COEF"], "ppo.lr_final": 0.0})
    network = peer_network_overrides({"network": {"activation": config["ACTIVATION"]}}, continuous=False)
    return ["env=gymnax", *network, *(f"{key}={override_text(value)}" for key, value in keys.items())]


def differences(cfg: dict, continuous: bool) -> dict:
    """{lab key or topic: what differs}, for the output beside the scores."""
    out = {}
    if get(cfg, "ppo.bootstrap_truncation"):
        out.update(ALWAYS_DIFFERENT)
    if continuous and get(cfg, "ppo.normalize_obs"):
        out["normalisation"] = CONTINUOUS_NORMALISATION
    for key, (lab, peer) in network_differences(cfg, continuous).items():
        out[key] = f"preset {lab!r}, PureJaxRL's {peer!r} (see the lab_at_peer_network case)"
    return out
