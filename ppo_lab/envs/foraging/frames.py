"""The foraging world's replay frames (`Foraging.render_episode`, `ppo-lab replay`), drawn with PIL.

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

Every frame is mapped onto one fixed palette (`palette()`: exact item colours, see `COLOURS`),
so two replays of the same checkpoint write identical GIF bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from ppo_lab.envs.base import Episode, text_palette

WHOLE_GRID_MAX = 48  # grids up to this many cells a side are drawn whole
WORLD_TARGET_PX = 384  # the default cell size makes the world about this big
PAD = 8
PANEL_W = 250
MINIMAP_MAX_PX = 128
TRAIL = 12  # how many past agent positions are shown
SHAPES = {"food": "disc", "poison": "diamond"}  # on cells of at least 4 px; smaller cells: squares

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


# ---- what each frame shows -------------------------------------------------------------------

@dataclass
class Record:
    """What one frame shows (host numpy values)."""
    step: int
    agent: int
    food_cells: np.ndarray  # the flat cells of the world's food, in slot order
    poison_cells: np.ndarray
    energy: float
    food: int  # eaten so far
    poison: int
    last_action: int | None
    probs: np.ndarray  # the policy at this state
    next_action: int | None  # the action taken from this state (None on the last frame)
    status: str  # "alive", "died", "truncated", "stopped"


STATUS_OF_ENDING = {"ended": "died", "truncated": "truncated", "stopped": "stopped"}


def records(env, episode: Episode) -> list[Record]:
    """What each frame shows: frames 0..N of `episode`, the counters as they stood there."""
    states, events, n = episode.states, episode.infos["events"], episode.num_steps
    # Eaten before frame t: the steps 0..t-1.
    food, poison = (np.concatenate([[0], np.cumsum(np.asarray(events[k], np.int64))]) for k in ("ate_food", "ate_poison"))
    return [Record(
        step=t, agent=int(states.agent[t]), food_cells=np.asarray(states.item_pos[t][: states.n_food[t]]),
        poison_cells=np.asarray(states.item_pos[t][env.food_slots: env.food_slots + states.n_poison[t]]),
        energy=float(states.energy[t]), food=int(food[t]), poison=int(poison[t]),
        last_action=None if t == 0 else int(episode.actions[t - 1]),
        probs=np.asarray(episode.action_probs[t], np.float64),
        next_action=int(episode.actions[t]) if t < n else None,
        status="alive" if t < n else STATUS_OF_ENDING[episode.ending]) for t in range(n + 1)]


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


def make_scene(env, episode: Episode, recs: list[Record], options: Mapping[str, Any]) -> Scene:
    g, v = env.grid_size, env.view_range
    cell_px = options.get("cell_px")
    windowed = g > WHOLE_GRID_MAX and not options.get("whole")
    cells = min(g, env.view_size + 4 * v) if windowed else g
    energy_scale = max([float(episode.params.energy_start)] + [r.energy for r in recs])
    labels = episode.labels
    scene = Scene(grid=g, view_range=v, cells=cells, windowed=windowed,
                  cell_px=int(cell_px or 1), mode=str(labels["reward"]), immortal=bool(episode.params.immortal),
                  mortal=bool(options.get("mortal")) and bool(episode.run_params.immortal),
                  policy=labels["policy"], seed=labels["seed"], update=labels["update"],
                  step_cap=episode.step_cap, energy_scale=energy_scale, action_names=list(env.action_names))
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
    # The agent's view as `Foraging.get_obs` finds it: a cell's offset from the window's corner on the torus.
    in_view = ((rows - ar + v) % g <= 2 * v)[:, None] & ((cols - ac + v) % g <= 2 * v)[None, :]
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
    for item, cells in (("food", rec.food_cells), ("poison", rec.poison_cells)):
        for pos in filter(None, (screen(int(cell)) for cell in cells)):
            x, y = pos
            shape = SHAPES[item] if px >= 4 else "square"  # tiny cells: squares
            _mark(draw, shape, [x + inset, y + inset, x + px - 1 - inset - (px >= 6), y + px - 1 - inset - (px >= 6)],
                  COLOURS[item])
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
    # Neighbours across the screen's border: wrapped, or (a window) in view, so no edge there.
    around = np.pad(in_view, 1, constant_values=True) if scene.windowed else np.pad(in_view, 1, mode="wrap")
    # (row, col) step to the neighbour -> the edge's box within a cell (x0, y0, x1, y1).
    edges = {(-1, 0): (0, 0, px - 1, w - 1), (1, 0): (0, px - w, px - 1, px - 1), (0, -1): (0, 0, w - 1, px - 1),
             (0, 1): (px - w, 0, px - 1, px - 1)}
    for (dr, dc), (x0, y0, x1, y1) in edges.items():
        for r, c in zip(*np.nonzero(in_view & ~around[1 + dr: 1 + dr + n, 1 + dc: 1 + dc + n])):
            x, y = PAD + c * px, PAD + r * px
            draw.rectangle([x + x0, y + y0, x + x1, y + y1], fill=COLOURS["view_outline"])


def _draw_minimap(img, draw, scene: Scene, rec: Record, x0: int, y0: int) -> None:
    g = scene.grid
    s = max(1, MINIMAP_MAX_PX // g)
    m = np.empty((g, g, 3), np.uint8)
    m[:] = COLOURS["bg"]
    m[rec.food_cells // g, rec.food_cells % g] = COLOURS["food"]
    m[rec.poison_cells // g, rec.poison_cells % g] = COLOURS["poison"]
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
    g = scene.grid
    world = (f"{scene.cells}x{scene.cells} window on a {g}x{g} torus" if scene.windowed
             else f"{g}x{g} torus, edges wrap")
    # The header: the mode, then what was replayed and what is drawn, smaller.
    for i, line in enumerate((mode, f"policy {scene.policy}   seed {scene.seed}", f"checkpoint update {scene.update}", world)):
        draw.text((x, y), line, font=small if i else big, fill=dim if i else text)
        y += 18
    y += 12

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


def _mark(draw, shape: str, box: list, colour) -> None:
    """An item's, the agent's or the view's mark filling `box` (x0, y0, x1, y1)."""
    x0, y0, x1, y1 = box
    if shape == "disc":
        draw.ellipse(box, fill=colour)
    elif shape == "diamond":
        mx, my = (x0 + x1) / 2, (y0 + y1) / 2
        draw.polygon([(mx, y0), (x1, my), (mx, y1), (x0, my)], fill=colour)
    elif shape == "square":
        draw.rectangle(box, fill=colour)
    else:
        draw.rectangle(box, outline=colour, width=2)


def _draw_legend(draw, x: int, y: int, font) -> int:
    """The legend's four rows from (x, y); returns the y below it."""
    for label, shape in (*SHAPES.items(), ("agent", "square"), ("view", "outline")):
        _mark(draw, shape, [x + 1, y + 2, x + 11, y + 12], COLOURS["view_outline" if label == "view" else label])
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


def palette() -> list[tuple[int, int, int]]:
    """One fixed palette for every frame: the named colours, and the text's antialiasing on the panel and the world."""
    texts = ("text", "dim", "food", "poison", "bar_chosen", "died")
    return text_palette(COLOURS.values(), (COLOURS["panel_bg"], COLOURS["bg"]), [COLOURS[name] for name in texts])


def render_episode(env, episode: Episode, options: Mapping[str, Any]) -> tuple[list[np.ndarray], str]:
    """The foraging world's `Env.render_episode`: one RGB frame per frame of `episode`."""
    recs = records(env, episode)
    scene = make_scene(env, episode, recs, options)
    fonts = (_font(15), _font(13), _font(12))
    frames = []
    for i, rec in enumerate(recs):
        trail = [r.agent for r in recs[max(0, i - TRAIL): i]]
        frames.append(np.asarray(render_frame(scene, rec, trail, fonts)))
    return frames, summary_line(recs)


def summary_line(recs: list[Record]) -> str:
    last = recs[-1]
    return (f"{last.step} steps, {len(recs)} frames, food {last.food}, poison {last.poison}, "
            f"final energy {last.energy:.2f}, died: {'yes' if last.status == 'died' else 'no'} ({last.status})")
