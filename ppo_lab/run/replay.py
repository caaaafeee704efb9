"""Render one episode of a trained foraging agent to a GIF, headless.

    ppo-lab replay RUN_DIR [--seed S] [--episode E] [--steps N] [--out PATH]
                                     [--fps F] [--cell-px P] [--sampled] [--mortal] [--whole]

What a frame shows
------------------
Left, the world:
- grids up to `WHOLE_GRID_MAX` (48) cells a side are drawn whole, fixed on screen (the agent
  moves, the view square wraps at the edges like the torus);
- larger grids (the reference's 128) are drawn as a window of `view + 2*margin` cells
  (margin = 2*view_range, so 31x31 cells at view range 5) that follows the agent, which stays
  at its centre; a minimap of the whole grid in the side panel shows where the window is.
  `--whole` draws the whole grid instead, scaled down (cells of at least 2 px).
- food: green discs; poison: red diamonds; agent: yellow square (grey once dead) with a faint
  trail of its last positions; the agent's view square: cells lit a shade brighter and
  outlined in blue.
Right, the panel: mode (reward mode; "immortal" when energy is frozen, "energy on" with
--mortal), policy (argmax or sampled), seed, checkpoint update, what part of the world is
drawn; step / step cap; energy (number, and a bar scaled to the episode's highest energy or
energy_start); food and poison eaten so far; the last action; the policy's action
probabilities at this state for the 8 compass moves (`env.action_names`), the action it
takes next highlighted; the episode's status (alive, DIED, truncated at the env's step
limit, stopped at the --steps budget); a legend.

`--seed S` picks which of the run's trained seeds to replay (default: its first);
`--episode E` picks the world and start position (any integer; default 0).
Output: `RUN_DIR/replay_seed<S>.gif` unless `--out`; prints the path, then one line:
`replay: N steps, N+1 frames, food F, poison P, final energy X, died: yes|no (status)`.
Errors (no config.yaml, a non-foraging run, no checkpoint, a seed not trained): a message
on stderr and exit status 2.

Frames: frame 0 is the state after reset (no action yet); frame k is the state after step k.
So a replay of N steps has N + 1 frames. The last frame is held for 1.5 s.

Dynamics: the run's own env and reward config, the network of its latest checkpoint. Energy
works as in training (a `proxy` run is immortal: energy frozen, it never dies); `--mortal`
turns energy on for such runs, as the continuous-survival evaluation does. The episode ends
at death, at the env's step limit (truncation) or after `--steps` steps. The policy and the
env step run for a single env in one jitted rollout (`ppo.rollout`); the world is
stepped with the env's own `transition` (the step without its auto-reset, so the frame of
the final state is the real one).

Deterministic: argmax actions by default, and the episode's key depends only on `--seed`
and `--episode`, so two replays of the same checkpoint write identical GIF bytes. Every
frame is mapped onto one fixed palette (exact item colours; see `COLOURS`).
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np
from PIL import Image, ImageDraw, ImageFont

from ppo_lab.errors import ConfigError
from ppo_lab.hardware import HardwareError
from ppo_lab.ppo.distributions import greedy_action, sample_action
from ppo_lab.ppo.rollout import initial_memory, policy_and_value, rollout
from ppo_lab.run.evaluate import params_per_seed
from ppo_lab.run.trained import load_trained  # applies the run's hardware, then imports jax
from ppo_lab.rundir import checkpoints, read_config

log = logging.getLogger(__name__)

REPLAY_KEY_SALT = 0x4E9A
WHOLE_GRID_MAX = 48  # grids up to this many cells a side are drawn whole
WORLD_TARGET_PX = 384  # the default cell size makes the world about this big
PAD = 8
PANEL_W = 250
MINIMAP_MAX_PX = 128
TRAIL = 12  # how many past agent positions are shown

COLOURS = {
    "bg": (18, 18, 24),  # canvas and cells outside the view
    "view_bg": (38, 40, 54),  # cells inside the agent's view
    "grid": (30, 31, 40),
    "frame": (70, 72, 90),  # the world's border
    "view_outline": (90, 170, 255),
    "food": (60, 200, 90),
    "poison": (230, 60, 70),
    "agent": (255, 210, 40),
    "agent_dead": (140, 140, 140),
    "trail": (120, 100, 40),
    "panel_bg": (28, 28, 36),
    "text": (235, 235, 240),
    "dim": (150, 150, 165),
    "bar_bg": (55, 56, 70),
    "bar": (110, 120, 150),
    "bar_chosen": (255, 210, 40),
    "energy_ok": (60, 200, 90),
    "energy_low": (240, 150, 40),
    "died": (230, 60, 70),
}


class ReplayError(RuntimeError):
    """The run cannot be replayed (not a foraging run, no such seed, ...)."""


# ---- the episode ---------------------------------------------------------------------------

@dataclass
class Record:
    """What one frame shows (host numpy values)."""
    step: int
    agent: int
    item_pos: np.ndarray
    n_food: int
    n_poison: int
    energy: float
    food: int  # eaten so far
    poison: int
    last_action: int | None
    probs: np.ndarray  # the policy at this state
    next_action: int | None  # the action taken from this state (None on the last frame)
    status: str  # "alive", "died", "truncated", "stopped"


def replay_key(seed: int, episode: int):
    return jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(seed), REPLAY_KEY_SALT), episode)


def run_episode(env, env_params, network, params, key, max_steps: int, deterministic: bool) -> list[Record]:
    """Play one episode in one jitted rollout (`ppo.rollout`) and cut it where it ended."""


    def policy_of(p):
        def choose(logits, k, mask):
            action = greedy_action(logits, mask) if deterministic else sample_action(k, logits, mask)
            return action, jax.nn.softmax(logits)

        def policy(obs, k, mask=None, memory=None):
            # One env, unbatched; `mask` (None here: the foraging world has none) as ppo.rollout
            # passes it; a recurrent agent's state carried from frame to frame (a batch of one env).
            net = policy_and_value(network, p, obs[None], None if memory is None else (memory[0], memory[1][None]))
            action, probs = choose(net.policy[0], k, mask)
            return (action, probs) if memory is None else (action, probs, net.carry)

        return policy

    def env_step(k, state, action):
        # The step without auto-reset, so the frame of the final state is the real one.
        state, events = env.transition(k, state, action, env_params)
        return env.get_obs(state, env_params), state, None, events["died"], None, dict(events, state=state)

    def record(_, step):
        info = step.info
        return (), dict(probs=step.extras, action=step.action, ate_food=info["ate_food"],
                        ate_poison=info["ate_poison"], died=info["died"], state=info["state"])

    @jax.jit
    def play(p, key):
        reset_key, key = jax.random.split(key)
        obs, state = env.reset_env(reset_key, env_params)
        memory = initial_memory(network, 1)
        if memory is not None:  # one env, unbatched: its reset flag is a scalar, as the env's done
            memory = (memory[0], memory[1][0])
        out = rollout(env_step, policy_of(p), state, obs, key, max_steps, record=record, memory=memory)
        last = policy_of(p)(out.obs, key, None, out.memory)
        return state, out.records, last[1]  # the last frame's policy

    first, steps, last_probs = jax.device_get(play(params, key))
    return _records(first, steps, last_probs, max_steps, int(env_params.max_steps_in_episode))


def _records(first, steps: dict, last_probs, max_steps: int, cap: int) -> list[Record]:
    """Frames 0..N from the rollout's per-step outputs, up to death, truncation or `max_steps`."""
    probs = np.concatenate([np.asarray(steps["probs"]), np.asarray(last_probs)[None]], 0)
    records: list[Record] = []
    food = poison = 0
    last_action = None
    status = "alive"
    for t in range(max_steps + 1):
        host = first if t == 0 else _index(steps["state"], t - 1)
        ended = status != "alive" or t == max_steps
        if status == "alive" and t == max_steps:
            status = "stopped"
        records.append(Record(
            step=t, agent=int(host.agent), item_pos=np.asarray(host.item_pos), n_food=int(host.n_food),
            n_poison=int(host.n_poison), energy=float(host.energy), food=food, poison=poison,
            last_action=last_action, probs=np.asarray(probs[t], np.float64),
            next_action=None if ended else int(steps["action"][t]), status=status))
        if ended:
            break
        food += int(steps["ate_food"][t])
        poison += int(steps["ate_poison"][t])
        last_action = int(steps["action"][t])
        if bool(steps["died"][t]):
            status = "died"
        elif int(steps["state"].time[t]) >= cap:
            status = "truncated"
    return records


def _index(tree, i: int):
    """Entry `i` of a pytree of stacked host arrays."""
    return jax.tree.map(lambda x: x[i], tree)


# ---- drawing ---------------------------------------------------------------------------------

def _font(size: int):
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1: the bitmap font, one size
        return ImageFont.load_default()


@dataclass
class Scene:
    """Everything about the picture that stays fixed over the episode."""
    grid: int
    view_range: int
    food_slots: int
    cells: int  # cells shown a side
    windowed: bool  # True: a window that follows the agent
    cell_px: int
    mode: str
    immortal: bool
    mortal: bool  # --mortal turned energy on for a run trained immortal
    policy: str
    seed: int
    update: int
    step_cap: int
    energy_scale: float
    action_names: list[str]

    @property
    def world_px(self) -> int:
        return self.cells * self.cell_px

    @property
    def minimap_px(self) -> int:
        return self.grid * max(1, MINIMAP_MAX_PX // self.grid) if self.windowed else 0

    @property
    def panel_h(self) -> int:
        # Header (4 lines), step, energy + bar, food/poison, last action, title + 8 bars,
        # status, legend; minimap under it when windowed.
        h = 4 * 18 + 12 + 18 + 34 + 18 + 18 + 22 + len(self.action_names) * 17 + 12 + 22 + 4 * 17
        return h + (self.minimap_px + 12 if self.windowed else 0)

    @property
    def size(self) -> tuple[int, int]:
        width = PAD + self.world_px + PAD + PANEL_W + PAD
        height = max(PAD + self.world_px + PAD, PAD + self.panel_h + PAD)
        return width, height


def make_scene(env, env_params, cfg, seed: int, update: int, step_cap: int, records: list[Record],
               cell_px: int | None, whole: bool, deterministic: bool, mortal: bool = False) -> Scene:
    g, v = env.grid_size, env.view_range
    windowed = g > WHOLE_GRID_MAX and not whole
    cells = min(g, env.view_size + 4 * v) if windowed else g
    energy_scale = max([float(env_params.energy_start)] + [r.energy for r in records])
    scene = Scene(grid=g, view_range=v, food_slots=env.food_slots, cells=cells, windowed=windowed,
                 cell_px=int(cell_px or 1), mode=str(cfg.reward.name), immortal=bool(env_params.immortal),
                  mortal=mortal,
                 policy="argmax" if deterministic else "sampled", seed=seed, update=update,
                 step_cap=step_cap, energy_scale=energy_scale, action_names=list(env.action_names))
    if cell_px is None:
        # The world about as tall as the panel (at least WORLD_TARGET_PX).
        target = max(WORLD_TARGET_PX, scene.panel_h)
        scene.cell_px = max(4 if windowed else 2, min(32, target // cells))
    return scene


def _origin(scene: Scene, agent: int) -> tuple[int, int]:
    """World (row, col) of the top-left cell shown."""
    if not scene.windowed:
        return 0, 0
    half = scene.cells // 2
    return (agent // scene.grid - half) % scene.grid, (agent % scene.grid - half) % scene.grid


def _draw_world(img, draw, scene: Scene, rec: Record, trail: list[int]) -> None:
    g, v, n, px = scene.grid, scene.view_range, scene.cells, scene.cell_px
    r0, c0 = _origin(scene, rec.agent)
    ar, ac = rec.agent // g, rec.agent % g
    rows = (r0 + np.arange(n)) % g
    cols = (c0 + np.arange(n)) % g

    def torus(a, b):
        d = np.abs(a - b)
        return np.minimum(d, g - d)

    in_view = (torus(rows, ar)[:, None] <= v) & (torus(cols, ac)[None, :] <= v)
    bg = np.where(in_view[..., None], COLOURS["view_bg"], COLOURS["bg"]).astype(np.uint8)
    tile = np.repeat(np.repeat(bg, px, 0), px, 1)
    if px >= 6:  # grid lines: the last pixel row and column of each cell
        tile[px - 1::px, :] = COLOURS["grid"]
        tile[:, px - 1::px] = COLOURS["grid"]
    img.paste(Image.fromarray(tile, "RGB"), (PAD, PAD))
    wp = scene.world_px
    draw.rectangle([PAD - 2, PAD - 2, PAD + wp + 1, PAD + wp + 1], outline=COLOURS["frame"])

    def screen(cell):
        """Top-left pixel of a world cell, or None when it is not shown."""
        r, c = (cell // g - r0) % g, (cell % g - c0) % g
        if r >= n or c >= n:
            return None
        return PAD + c * px, PAD + r * px

    inset = max(1, px // 6) if px >= 6 else 0
    for cell in trail if px >= 4 else []:
        pos = screen(cell)
        if pos is not None:
            x, y = pos
            q = max(1, px // 3)
            draw.rectangle([x + q, y + q, x + px - 1 - q, y + px - 1 - q], fill=COLOURS["trail"])
    active = np.zeros(len(rec.item_pos), bool)
    active[: rec.n_food] = True
    active[scene.food_slots: scene.food_slots + rec.n_poison] = True
    for slot in np.flatnonzero(active):
        pos = screen(int(rec.item_pos[slot]))
        if pos is None:
            continue
        x, y = pos
        x1, y1 = x + px - 1 - inset - (px >= 6), y + px - 1 - inset - (px >= 6)
        x0, y0 = x + inset, y + inset
        if slot < scene.food_slots:
            if px >= 4:
                draw.ellipse([x0, y0, x1, y1], fill=COLOURS["food"])
            else:
                draw.rectangle([x0, y0, x1, y1], fill=COLOURS["food"])
        elif px >= 4:
            mx, my = (x0 + x1) / 2, (y0 + y1) / 2
            draw.polygon([(mx, y0), (x1, my), (mx, y1), (x0, my)], fill=COLOURS["poison"])
        else:
            draw.rectangle([x0, y0, x1, y1], fill=COLOURS["poison"])
    pos = screen(rec.agent)
    if pos is not None:
        x, y = pos
        colour = COLOURS["agent_dead"] if rec.status == "died" else COLOURS["agent"]
        if px >= 6:
            a = max(1, px // 10)
            draw.rectangle([x + a, y + a, x + px - 2 - a, y + px - 2 - a], fill=colour)
        else:  # tiny cells: a 5 px square centred on the cell, so the agent stays visible
            cx, cy = x + px // 2, y + px // 2
            draw.rectangle([cx - 2, cy - 2, cx + 2, cy + 2], fill=colour)
        if rec.status == "died" and px >= 6:
            draw.line([x + inset, y + inset, x + px - 2 - inset, y + px - 2 - inset], fill=COLOURS["died"], width=2)
            draw.line([x + inset, y + px - 2 - inset, x + px - 2 - inset, y + inset], fill=COLOURS["died"], width=2)

    _draw_view_outline(draw, scene, in_view)


def _draw_view_outline(draw, scene: Scene, in_view: np.ndarray) -> None:
    """Every edge between a cell in view and one out of view. At the screen border, the
    neighbour is the wrapped cell on the other side (only when the whole grid is shown; a
    window always holds the whole view with room to spare)."""
    n, px = scene.cells, scene.cell_px
    w = max(1, px // 8)
    for r, c in zip(*np.nonzero(in_view)):
        x, y = PAD + c * px, PAD + r * px
        for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            rr, cc = r + dr, c + dc
            inside = 0 <= rr < n and 0 <= cc < n
            if inside:
                if in_view[rr, cc]:
                    continue
            elif scene.windowed or in_view[rr % n, cc % n]:
                continue
            if dr == -1:
                box = [x, y, x + px - 1, y + w - 1]
            elif dr == 1:
                box = [x, y + px - w, x + px - 1, y + px - 1]
            elif dc == -1:
                box = [x, y, x + w - 1, y + px - 1]
            else:
                box = [x + px - w, y, x + px - 1, y + px - 1]
            draw.rectangle(box, fill=COLOURS["view_outline"])


def _draw_minimap(img, draw, scene: Scene, rec: Record, x0: int, y0: int) -> None:
    g = scene.grid
    s = max(1, MINIMAP_MAX_PX // g)
    m = np.empty((g, g, 3), np.uint8)
    m[:] = COLOURS["bg"]
    food = rec.item_pos[: rec.n_food]
    poison = rec.item_pos[scene.food_slots: scene.food_slots + rec.n_poison]
    m[food // g, food % g] = COLOURS["food"]
    m[poison // g, poison % g] = COLOURS["poison"]
    m = np.repeat(np.repeat(m, s, 0), s, 1)
    # The window's outline, wrapped around the map like the torus.
    r0, c0 = _origin(scene, rec.agent)
    n = scene.cells * s
    side = np.arange(n)
    a, b = r0 * s, c0 * s
    for rows, cols in ((a, b + side), (a + n - 1, b + side), (a + side, b), (a + side, b + n - 1)):
        m[np.asarray(rows) % (g * s), np.asarray(cols) % (g * s)] = COLOURS["view_outline"]
    img.paste(Image.fromarray(m, "RGB"), (x0, y0))
    draw.rectangle([x0 - 1, y0 - 1, x0 + g * s, y0 + g * s], outline=COLOURS["frame"])
    ar, ac = rec.agent // g, rec.agent % g
    colour = COLOURS["agent_dead"] if rec.status == "died" else COLOURS["agent"]
    draw.rectangle([x0 + ac * s - 1, y0 + ar * s - 1, x0 + ac * s + s, y0 + ar * s + s], fill=colour)


def _draw_panel(img, draw, scene: Scene, rec: Record, fonts) -> None:
    big, font, small = fonts
    x0 = PAD + scene.world_px + PAD
    width, height = scene.size
    draw.rectangle([x0 - 4, 0, width - 1, height - 1], fill=COLOURS["panel_bg"])
    x, y = x0 + 4, PAD
    text = COLOURS["text"]
    dim = COLOURS["dim"]
    bar_w = PANEL_W - 16

    mode = scene.mode + ("  (immortal)" if scene.immortal else "  (energy on: --mortal)" if scene.mortal else "")
    draw.text((x, y), mode, font=big, fill=text)
    y += 18
    draw.text((x, y), f"policy {scene.policy}   seed {scene.seed}", font=small, fill=dim)
    y += 18
    draw.text((x, y), f"checkpoint update {scene.update}", font=small, fill=dim)
    y += 18
    g = scene.grid
    world = (f"{scene.cells}x{scene.cells} window on a {g}x{g} torus" if scene.windowed
             else f"{g}x{g} torus, edges wrap")
    draw.text((x, y), world, font=small, fill=dim)
    y += 18 + 12

    draw.text((x, y), f"step {rec.step} / {scene.step_cap}", font=font, fill=text)
    y += 18
    label = f"energy {rec.energy:.2f}" + ("  (frozen)" if scene.immortal else "")
    draw.text((x, y), label, font=font, fill=text)
    y += 18
    draw.rectangle([x, y, x + bar_w, y + 9], fill=COLOURS["bar_bg"])
    frac = min(max(rec.energy / scene.energy_scale, 0.0), 1.0) if scene.energy_scale > 0 else 0.0
    low = rec.energy < 0.25 * scene.energy_scale
    if frac > 0:
        draw.rectangle([x, y, x + round(frac * bar_w), y + 9], fill=COLOURS["energy_low" if low else "energy_ok"])
    y += 16
    draw.text((x, y), "food", font=font, fill=text)
    draw.text((x + 40, y), f"{rec.food}", font=font, fill=COLOURS["food"])
    draw.text((x + 100, y), "poison", font=font, fill=text)
    draw.text((x + 152, y), f"{rec.poison}", font=font, fill=COLOURS["poison"])
    y += 18
    last = "-" if rec.last_action is None else scene.action_names[rec.last_action]
    draw.text((x, y), f"last action {last}", font=font, fill=text)
    y += 18 + 4

    draw.text((x, y), "policy here (next action highlighted)", font=small, fill=dim)
    y += 18
    name_w, num_w = 28, 40
    bw = bar_w - name_w - num_w
    for i, name in enumerate(scene.action_names):
        chosen = rec.next_action == i
        p = float(rec.probs[i])
        draw.text((x, y - 1), name, font=font, fill=COLOURS["bar_chosen"] if chosen else text)
        draw.rectangle([x + name_w, y + 2, x + name_w + bw, y + 11], fill=COLOURS["bar_bg"])
        if p > 0:
            draw.rectangle([x + name_w, y + 2, x + name_w + max(1, round(p * bw)), y + 11],
                           fill=COLOURS["bar_chosen"] if chosen else COLOURS["bar"])
        draw.text((x + name_w + bw + 6, y - 1), f"{p:.2f}", font=small, fill=text if chosen else dim)
        y += 17
    y += 12

    status = {"alive": "alive", "died": "DIED (energy <= 0)", "truncated": "truncated (step limit)",
              "stopped": "stopped (step budget)"}[rec.status]
    draw.text((x, y), status, font=big, fill=COLOURS["died"] if rec.status == "died" else text)
    y += 22

    y = _draw_legend(draw, x, y, small)
    if scene.windowed:
        y += 12
        _draw_minimap(img, draw, scene, rec, x, y)


def _draw_legend(draw, x: int, y: int, font) -> int:
    """The legend's four rows from (x, y); returns the y below it."""
    for colour, shape, label in ((COLOURS["food"], "disc", "food"), (COLOURS["poison"], "diamond", "poison"),
                                 (COLOURS["agent"], "square", "agent"), (COLOURS["view_outline"], "outline", "view")):
        bx, by = x + 1, y + 2
        if shape == "disc":
            draw.ellipse([bx, by, bx + 10, by + 10], fill=colour)
        elif shape == "diamond":
            draw.polygon([(bx + 5, by), (bx + 10, by + 5), (bx + 5, by + 10), (bx, by + 5)], fill=colour)
        elif shape == "square":
            draw.rectangle([bx, by, bx + 10, by + 10], fill=colour)
        else:
            draw.rectangle([bx, by, bx + 10, by + 10], outline=colour, width=2)
        draw.text((x + 18, y), label, font=font, fill=COLOURS["dim"])
        y += 17
    return y


def render_frame(scene: Scene, rec: Record, trail: list[int], fonts):
    """One RGB frame."""
    img = Image.new("RGB", scene.size, COLOURS["bg"])
    draw = ImageDraw.Draw(img)
    _draw_world(img, draw, scene, rec, trail)
    _draw_panel(img, draw, scene, rec, fonts)
    return img


def _palette_image():
    """One fixed palette for every frame: the named colours exactly, plus ramps from each
    background to each text colour (antialiased text)."""
    colours = list(dict.fromkeys(COLOURS.values()))
    for bg in (COLOURS["panel_bg"], COLOURS["bg"]):
        for fg in (COLOURS["text"], COLOURS["dim"], COLOURS["food"], COLOURS["poison"], COLOURS["bar_chosen"],
                   COLOURS["died"]):
            for i in range(1, 8):
                c = tuple(round(b + (f - b) * i / 8) for b, f in zip(bg, fg))
                if c not in colours:
                    colours.append(c)
    colours = colours[:256]
    flat = [v for c in colours for v in c]
    flat += flat[:3] * (256 - len(colours))
    pal = Image.new("P", (1, 1))
    pal.putpalette(flat)
    return pal


def render_gif(scene: Scene, records: list[Record], path: Path, fps: float) -> None:
    fonts = (_font(15), _font(13), _font(12))
    pal = _palette_image()
    frames = []
    for i, rec in enumerate(records):
        trail = [r.agent for r in records[max(0, i - TRAIL): i]]
        rgb = render_frame(scene, rec, trail, fonts)
        frames.append(rgb.quantize(palette=pal, dither=Image.Dither.NONE))
    duration = max(20, round(1000 / fps))
    durations = [duration] * len(frames)
    durations[-1] = max(duration, 1500)
    path.parent.mkdir(parents=True, exist_ok=True)
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=durations, loop=0)


# ---- command line ----------------------------------------------------------------------------

def _check_run_dir(run_dir: Path) -> dict:
    """Fail fast, before jax is imported (the run's hardware settings come first), on what
    cannot be replayed: not a run directory, not a foraging run, no checkpoint."""
    raw = read_config(run_dir)  # FileNotFoundError: not a run directory
    env_name = (raw.get("env") or {}).get("name")
    if env_name != "foraging":
        raise ReplayError(f"{run_dir} is a '{env_name}' run; replay renders only the foraging world (env=foraging)")
    ckpt_dir = checkpoints.checkpoint_dir(run_dir)
    if not checkpoints.has_checkpoint(ckpt_dir):
        raise ReplayError(f"{run_dir} has no checkpoint to replay (no complete checkpoint in {ckpt_dir}); "
                          f"train it first or wait for its first checkpoint")
    return raw


def replay(run_dir: Path, seed: int | None = None, episode: int = 0, steps: int | None = None,
           out: Path | None = None, fps: float = 8.0, cell_px: int | None = None, sampled: bool = False,
           mortal: bool = False, whole: bool = False) -> tuple[Path, list[Record]]:
    run_dir = Path(run_dir)
    _check_run_dir(run_dir)

    cfg, comp, state, meta = load_trained(run_dir)

    seed = cfg.seeds[0] if seed is None else seed
    if seed not in cfg.seeds:
        raise ReplayError(f"seed {seed} was not trained in {run_dir}; its seeds are {cfg.seeds}")
    params = params_per_seed(state, comp.layout, cfg.num_seeds)
    params = params[cfg.seeds.index(seed)] if len(params) > 1 else params[0]
    env, env_params = comp.env, comp.env_params
    if mortal:
        env_params = env_params.replace(immortal=False)
    cap = int(env_params.max_steps_in_episode)
    steps = cap if steps is None else steps
    if steps < 1:
        raise ReplayError(f"--steps must be >= 1, got {steps}")
    records = run_episode(env, env_params, comp.network, params, replay_key(seed, episode), min(steps, cap),
                          deterministic=not sampled)
    scene = make_scene(env, env_params, cfg, seed, int(meta["update"]), min(steps, cap), records, cell_px, whole,
                       deterministic=not sampled, mortal=mortal and bool(comp.env_params.immortal))
    out = Path(out) if out is not None else run_dir / f"replay_seed{seed}.gif"
    render_gif(scene, records, out, fps)
    return out, records


def summary_line(records: list[Record]) -> str:
    last = records[-1]
    return (f"{last.step} steps, {len(records)} frames, food {last.food}, poison {last.poison}, "
            f"final energy {last.energy:.2f}, died: {'yes' if last.status == 'died' else 'no'} ({last.status})")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Render one episode of a trained foraging agent to a GIF.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--seed", type=int, default=None, help="which trained seed (default: the run's first)")
    parser.add_argument("--episode", type=int, default=0, help="which episode (its world and start): any integer")
    parser.add_argument("--steps", type=int, default=None, help="at most this many steps (default: the env's max_steps)")
    parser.add_argument("--out", type=Path, default=None, help="GIF path (default: RUN_DIR/replay_seed<S>.gif)")
    parser.add_argument("--fps", type=float, default=8.0, help="frames per second (default 8)")
    parser.add_argument("--cell-px", type=int, default=None, help="pixels per cell (default: world about 384 px)")
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
        out, records = replay(args.run_dir, seed=args.seed, episode=args.episode, steps=args.steps, out=args.out,
                              fps=args.fps, cell_px=args.cell_px, sampled=args.sampled, mortal=args.mortal,
                              whole=args.whole)
    except (ReplayError, FileNotFoundError, ConfigError, HardwareError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(out)
    print(f"replay: {summary_line(records)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
