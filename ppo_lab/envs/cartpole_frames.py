"""Replay frames of gymnax's CartPole-v1 (`GymnaxEnv.render_episode`), drawn with PIL.

A frame: the track (its ends at the cart's limits, `x_threshold`), the cart, the pole at its
angle (its length to scale: `2 * length` of the params, the full pole), a hinge; above them,
the step, the episode's return so far, the action taken next (push left | right) with the
policy's probabilities, and the status (balancing, ended, truncated at the step limit, stopped
at the replay's budget). Flat colours (`COLOURS`) and the text's antialiasing: one fixed
palette maps every frame exactly.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from ppo_lab.envs.base import Episode, text_palette

WIDTH, HEIGHT = 480, 240
TRACK_Y = 190  # the track's height on screen (pixels from the top)
CART_W, CART_H = 50, 26
ACTION_NAMES = ("left", "right")
STATUS = {"ended": "ended (pole fell or cart left the track)", "truncated": "truncated (step limit)",
          "stopped": "stopped (step budget)"}

COLOURS = {
    "bg": (245, 245, 240),
    "track": (60, 60, 70),
    "cart": (40, 90, 160),
    "pole": (200, 120, 50),
    "hinge": (30, 30, 30),
    "text": (20, 20, 25),
    "ended": (200, 40, 40),
}


def palette() -> list[tuple[int, int, int]]:
    """The named colours, and the text's antialiasing."""
    return text_palette(COLOURS.values(), [COLOURS["bg"]], [COLOURS["text"], COLOURS["ended"]])


def _draw(draw, font, x: float, theta: float, params, text: list[str], ended: bool) -> None:
    scale = (WIDTH - 2 * CART_W) / (2 * float(params.x_threshold))  # pixels per metre of track
    draw.line([(CART_W // 2, TRACK_Y), (WIDTH - CART_W // 2, TRACK_Y)], fill=COLOURS["track"], width=2)
    cx = WIDTH / 2 + x * scale
    top = TRACK_Y - CART_H
    draw.rectangle([cx - CART_W / 2, top, cx + CART_W / 2, TRACK_Y - 1], fill=COLOURS["cart"])
    pole = 2 * float(params.length) * scale
    tip = (cx + pole * np.sin(theta), top - pole * np.cos(theta))
    draw.line([(cx, top), tip], fill=COLOURS["pole"], width=8)
    draw.ellipse([cx - 4, top - 4, cx + 4, top + 4], fill=COLOURS["hinge"])
    for i, line in enumerate(text):
        last = i == len(text) - 1
        draw.text((10, 8 + 16 * i), line, font=font, fill=COLOURS["ended"] if last and ended else COLOURS["text"])


def render_episode(episode: Episode, options: Mapping[str, Any]) -> tuple[list[np.ndarray], str]:
    """One frame per frame of `episode`, and a summary line."""
    font = ImageFont.load_default()
    states, n = episode.states, episode.num_steps
    returns = np.concatenate([[0.0], np.cumsum(np.asarray(episode.rewards, np.float64))])
    frames = []
    for t in range(n + 1):
        status = "balancing" if t < n else STATUS[episode.ending]
        nxt = "-" if t == n else ACTION_NAMES[int(episode.actions[t])]
        probs = "" if episode.action_probs is None else \
            "  (p left {:.2f}, right {:.2f})".format(*map(float, episode.action_probs[t]))
        text = [f"CartPole   policy {episode.labels['policy']}   seed {episode.labels['seed']}   "
                f"update {episode.labels['update']}",
                f"step {t} / {episode.step_cap}   return {returns[t]:.0f}",
                f"next push {nxt}{probs}",
                status]
        img = Image.new("RGB", (WIDTH, HEIGHT), COLOURS["bg"])
        _draw(ImageDraw.Draw(img), font, float(states.x[t]), float(states.theta[t]), episode.params, text,
              ended=t == n and episode.ending == "ended")
        frames.append(np.asarray(img))
    summary = f"{n} steps, {n + 1} frames, return {returns[n]:.0f}, {STATUS[episode.ending]}"
    return frames, summary
