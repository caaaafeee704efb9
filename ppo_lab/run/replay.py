"""`ppo-lab replay RUN_DIR`: one episode of a trained agent as a GIF, headless, for any env that
draws its frames (`Env.render_episode`; docs/envs.md lists the envs that do).

    ppo-lab replay RUN_DIR [--seed S] [--episode E] [--steps N] [--out PATH]
                                     [--fps F] [--cell-px P] [--sampled] [--mortal] [--whole]

`--seed S` picks which of the run's trained seeds to replay (default: its first);
`--episode E` picks the episode's start (any integer; default 0). `--cell-px`, `--whole` and
`--mortal` are drawing and play options an env reads if it knows them (a grid world's pixels
per cell, its whole grid however large, energy on for a run trained immortal).
Output: `RUN_DIR/replay_seed<S>.gif` unless `--out`; prints the path, then one line,
`replay: ...`, the env's summary of the episode. Errors (no config.yaml, no checkpoint, a seed
not trained, an env that draws no frames): a message on stderr and exit status 2.

Frames: frame 0 is the state after reset (no action yet); frame k is the state after step k.
So a replay of N steps has N + 1 frames. The last frame is held for 1.5 s (`LAST_FRAME_MS`).

Dynamics: the run's own env and config (`Env.params_for_replay` may turn an option on), the
network of its latest checkpoint, the trainer's action policy (`ppo.rollout.action_policy`:
argmax or a sample, never a masked action) for a batch of one env inside one jitted rollout.
The env steps with gymnax's `step_env`, the step without its auto-reset, so the last frame
shows the state the episode really ended in. The episode ends when the env's step says done,
at the env's step limit, or after `--steps` steps; it comes back as an `envs.base.Episode` on
the host, cut where it ended, which the env draws (`Env.render_episode`).

GIF: an env that names its colours (`Env.frame_palette`) gets every frame mapped onto exactly
those, without dithering (a drawing of few flat colours keeps them); any other env's frames get
an adaptive palette each (Pillow's median cut, deterministic).

Deterministic: argmax actions by default, and the episode's key depends only on `--seed`
and `--episode`, so two replays of the same checkpoint write identical GIF bytes.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np
from PIL import Image

from ppo_lab.envs.base import Episode
from ppo_lab.errors import ConfigError
from ppo_lab.hardware import HardwareError
from ppo_lab.ppo.distributions import allow_all_if_none_valid
from ppo_lab.ppo.policies import for_env
from ppo_lab.ppo.rollout import action_policy, initial_memory, rollout
from ppo_lab.run.evaluate import load_trained, params_per_seed  # load_trained applies the run's hardware first
from ppo_lab.rundir import CHECKPOINTS, has_checkpoint, read_config

log = logging.getLogger(__name__)

REPLAY_KEY_SALT = 0x4E9A
LAST_FRAME_MS = 1500


def replay_key(seed: int, episode: int):
    """The key of episode `episode` of seed `seed`: a replay is a pure function of the two."""
    return jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(seed), REPLAY_KEY_SALT), episode)


def _one_env_policy(network, params, deterministic: bool, dist):
    """`action_policy` for one unbatched env: a batch of one for the network, and the policy's
    action probabilities (a discrete env; None otherwise) as what `record` sees."""
    policy = action_policy(network, params, deterministic, dist)

    def probs(out):
        return None if dist.continuous else jax.nn.softmax(out[0])

    def one(obs, key, mask=None, memory=None):
        mask = None if mask is None else mask[None]
        if memory is None:
            action, out = policy(obs[None], key, mask)
            return action[0], probs(out)
        # A recurrent agent's state carried from frame to frame; its reset flag a scalar, as the env's done.
        action, out, carry = policy(obs[None], key, mask, (memory[0], memory[1][None]))
        return action[0], probs(out), carry

    return one


def _ending(done: np.ndarray, num_steps: int, cap: int | None) -> tuple[int, str]:
    """How many steps the episode took, and how it ended (`Episode.ending`)."""
    ended = np.flatnonzero(done)
    if ended.size:
        return int(ended[0]) + 1, "ended"
    return num_steps, "truncated" if cap is not None and num_steps >= cap else "stopped"


def play_episode(env, env_params, run_params, network, dist, params, key, num_steps: int, deterministic: bool,
                 labels: Mapping[str, Any]) -> Episode:
    """Play `num_steps` steps from a reset in one jitted rollout, whether or not the episode
    ends before (the first state, each step's outputs stacked, and the policy at the last
    state), and cut it on the host where it ended."""
    action_mask = (lambda s: allow_all_if_none_valid(env.action_mask(s, env_params))) if env.has_action_mask else None

    def env_step(k, state, action):
        obs, state, reward, done, info = env.step_env(k, state, action, env_params)
        return obs, state, reward, done, None, {"info": info, "state": state}

    def record(_, step):
        return (), dict(probs=step.extras, action=step.action, reward=step.reward, done=step.terminated, **step.info)

    @jax.jit
    def run(p, key):
        reset_key, key = jax.random.split(key)
        obs, state = env.reset_env(reset_key, env_params)
        memory = initial_memory(network, 1)
        if memory is not None:
            memory = (memory[0], memory[1][0])
        policy = _one_env_policy(network, p, deterministic, dist)
        out = rollout(env_step, policy, state, obs, key, num_steps, record=record, action_mask=action_mask, memory=memory)
        mask = None if action_mask is None else action_mask(out.env_state)
        last = policy(out.obs, key, mask, out.memory)
        return state, out.records, last[1]

    first, steps, last_probs = jax.device_get(run(params, key))
    n, ending = _ending(np.asarray(steps["done"]), num_steps, env.episode_limit(env_params))
    cut = lambda tree: jax.tree.map(lambda x: np.asarray(x)[:n], tree)  # noqa: E731
    states = jax.tree.map(lambda head, rest: np.concatenate([np.asarray(head)[None], np.asarray(rest)[:n]]),
                          first, steps["state"])
    probs = None  # the policy at frame k: what step k + 1 chose from, the last frame's played after the rollout
    if not dist.continuous:
        probs = np.concatenate([np.asarray(steps["probs"]), np.asarray(last_probs)[None]])[: n + 1]
    return Episode(states=states, actions=np.asarray(steps["action"])[:n], rewards=np.asarray(steps["reward"])[:n],
                   infos=cut(steps["info"]), action_probs=probs, ending=ending, step_cap=num_steps,
                   params=env_params, run_params=run_params, labels=dict(labels))


def _palette_image(colours: Sequence[tuple[int, int, int]]) -> Image.Image:
    colours = list(colours)[:256]
    flat = [v for c in colours for v in c]
    flat += flat[:3] * (256 - len(colours))  # unused entries: the first colour
    pal = Image.new("P", (1, 1))
    pal.putpalette(flat)
    return pal


def write_gif(frames: Sequence[np.ndarray], path: Path, fps: float,
              palette: Sequence[tuple[int, int, int]] | None = None) -> None:
    """`frames` as a looping GIF at `fps` frames per second (at least 20 ms a frame)."""
    pal = None if palette is None else _palette_image(palette)
    images = []
    for frame in frames:
        rgb = Image.fromarray(np.asarray(frame, np.uint8), "RGB")
        images.append(rgb.quantize(palette=pal, dither=Image.Dither.NONE) if pal is not None
                      else rgb.quantize(dither=Image.Dither.NONE))
    duration = max(20, round(1000 / fps))
    durations = [duration] * len(images)
    durations[-1] = max(duration, LAST_FRAME_MS)
    path.parent.mkdir(parents=True, exist_ok=True)
    images[0].save(path, save_all=True, append_images=images[1:], duration=durations, loop=0)


class ReplayError(RuntimeError):
    """The run cannot be replayed (no checkpoint, no such seed, an env that draws no frames, ...)."""


def check_draws_frames(env, env_name: str) -> None:
    """An env without a renderer is refused, naming what it lacks."""
    if not env.draws_frames:
        raise ReplayError(f"env {env_name!r} ({type(env).__name__}) draws no frames: a replay needs its "
                          f"`render_episode` (the Env contract, ppo_lab/envs/base.py; docs/envs.md)")


def replay(run_dir: Path, seed: int | None = None, episode: int = 0, steps: int | None = None,
           out: Path | None = None, fps: float = 8.0, cell_px: int | None = None, sampled: bool = False,
           mortal: bool = False, whole: bool = False) -> tuple[Path, str]:
    """Write the GIF of one episode; returns its path and the env's one-line summary."""
    run_dir = Path(run_dir)
    # What cannot be replayed fails in a second, before the run's hardware settings start XLA.
    read_config(run_dir)  # FileNotFoundError: not a run directory
    if not has_checkpoint(run_dir / CHECKPOINTS):
        raise ReplayError(f"{run_dir} has no checkpoint to replay (no complete checkpoint in {run_dir / CHECKPOINTS}); "
                          f"train it first or wait for its first checkpoint")
    cfg, comp, state, meta = load_trained(run_dir)
    env = comp.env
    check_draws_frames(env, cfg.env.name)
    seed = cfg.seeds[0] if seed is None else seed
    if seed not in cfg.seeds:
        raise ReplayError(f"seed {seed} was not trained in {run_dir}; its seeds are {cfg.seeds}")
    params = params_per_seed(state, comp.layout, cfg.num_seeds)[cfg.seeds.index(seed)]
    options = {"cell_px": cell_px, "whole": whole, "mortal": mortal}
    env_params = env.params_for_replay(comp.env_params, options)
    cap = env.episode_limit(env_params)
    steps = cap if steps is None else steps
    if steps is None or steps < 1:
        raise ReplayError(f"--steps must be >= 1, got {steps}" if steps is not None else
                          f"env {cfg.env.name!r} has no step limit: give --steps")
    labels = {"reward": cfg.reward.name, "policy": "sampled" if sampled else "argmax", "seed": seed,
              "update": int(meta["update"])}
    dist = for_env(env, env_params, cfg.network.squash)
    played = play_episode(env, env_params, comp.env_params, comp.network, dist, params, replay_key(seed, episode),
                          min(steps, cap or steps), deterministic=not sampled, labels=labels)
    frames, summary = env.render_episode(played, options)
    out = Path(out) if out is not None else run_dir / f"replay_seed{seed}.gif"
    write_gif(frames, out, fps, env.frame_palette)
    return out, summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Render one episode of a trained agent to a GIF "
                                                 "(an env that draws its frames).")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--seed", type=int, default=None, help="which trained seed (default: the run's first)")
    parser.add_argument("--episode", type=int, default=0, help="which episode (its start): any integer")
    parser.add_argument("--steps", type=int, default=None, help="at most this many steps (default: the env's limit)")
    parser.add_argument("--out", type=Path, default=None, help="GIF path (default: RUN_DIR/replay_seed<S>.gif)")
    parser.add_argument("--fps", type=float, default=8.0, help="frames per second (default 8)")
    parser.add_argument("--cell-px", type=int, default=None, help="pixels per cell, for a grid world (default: "
                                                                 "world about 384 px)")
    parser.add_argument("--sampled", action="store_true", help="sample actions instead of argmax")
    parser.add_argument("--mortal", action="store_true", help="energy on even for a run trained immortal (proxy)")
    parser.add_argument("--whole", action="store_true", help="draw the whole grid even when it is large")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="[%(levelname)s] %(message)s")
    if args.fps <= 0:
        parser.error("--fps must be > 0")
    if args.cell_px is not None and args.cell_px < 1:
        parser.error("--cell-px must be >= 1")
    try:
        out, summary = replay(args.run_dir, seed=args.seed, episode=args.episode, steps=args.steps, out=args.out,
                              fps=args.fps, cell_px=args.cell_px, sampled=args.sampled, mortal=args.mortal,
                              whole=args.whole)
    except (ReplayError, FileNotFoundError, ConfigError, HardwareError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(out)
    print(f"replay: {summary}")
    return 0
