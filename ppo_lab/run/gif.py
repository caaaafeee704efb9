"""Frames (uint8 [H, W, 3] arrays) to an animated GIF, the same bytes for the same frames.

An env that names its colours (`Env.frame_palette`) gets every frame mapped onto exactly those,
without dithering (a drawing of few flat colours keeps them); any other env's frames get an
adaptive palette each (Pillow's median cut, deterministic). The last frame is held for 1.5 s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
from PIL import Image

LAST_FRAME_MS = 1500


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
