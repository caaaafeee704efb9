"""`ppo-lab docs`: re-render every block of the docs pages from its records.

    ppo-lab docs                 write every page whose blocks differ from what their records render
                                 (and every block's figure that differs from what they draw)
    ppo-lab docs --check         write nothing; exit 1 naming each stale block or figure (and how a block differs)
    ppo-lab docs NAME ...        only these blocks

Pages: README.md and docs/*.md under the root (default: the repository holding this package).
Exit 2, before any page is written: a page's markers that do not pair, a block a page marks but
no renderer knows (or one the registry places on a page that lacks it), or a missing record.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path
from typing import Sequence

from ppo_lab import rundir
from ppo_lab.analysis import page_blocks
from ppo_lab.config_keys import PROJECT_ROOT
from ppo_lab.pages.block import COMMAND, Block
from ppo_lab.pages.registry import BLOCKS, NAMES


def pages(root: Path) -> list[Path]:
    return [p for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))] if p.exists()]


def check_markers(root: Path) -> None:
    """ValueError naming the first page whose markers do not pair, mark a block no renderer
    knows, or lack a block the registry places there."""
    for path in pages(root):
        text = path.read_text()
        try:
            names = page_blocks.block_names(text)
        except ValueError as exc:
            raise ValueError(f"{path.relative_to(root)}: {exc}") from None
        if unknown := [n for n in names if n not in NAMES]:
            raise ValueError(f"{path.relative_to(root)}: block {unknown[0]!r} has no renderer; known: {', '.join(NAMES)}")
    for block in BLOCKS:
        page = root / block.page
        if not page.exists() or page_blocks.current(page.read_text(), block.name) is None:
            start, end = page_blocks.markers(block.name)
            raise ValueError(f"{block.page} has no block {block.name!r}: put {start} ... {end} where it belongs")


def stale(blocks: Sequence[Block], root: Path) -> list[tuple[Block, str, str]]:
    """(block, its text as its records render it, a diff of the page's text against that) for
    each block the page holds otherwise."""
    out = []
    for block in blocks:
        held = page_blocks.current((root / block.page).read_text(), block.name) or ""
        fresh = block.text(root)
        if held != fresh:
            diff = difflib.unified_diff(held.splitlines(), fresh.splitlines(), "page", "records", lineterm="", n=1)
            out.append((block, fresh, "\n".join(diff)))
    return out


def stale_figures(blocks: Sequence[Block], root: Path) -> list[tuple[Block, bytes]]:
    """(block, its figure as drawn today) for each block whose figure file is missing or differs;
    a block not measured yet (none of its records) shows no figure."""
    out = []
    for block in blocks:
        if block.figure is None or not any((root / r).exists() for r in block.records):
            continue
        path, drawn = root / block.figure.path, block.figure.png(root)
        if not path.exists() or path.read_bytes() != drawn:
            out.append((block, drawn))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description="Re-render the docs pages' blocks from their records.")
    parser.add_argument("names", nargs="*", help=f"blocks to render (default: all {len(BLOCKS)})")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each stale block")
    parser.add_argument("--root", type=Path, default=PROJECT_ROOT, help="the repository (default: %(default)s)")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if unknown := [n for n in args.names if n not in NAMES]:
        print(f"{COMMAND}: no block {unknown[0]!r}; known: {', '.join(NAMES)}", file=sys.stderr)
        return 2
    blocks = [NAMES[n] for n in args.names] or list(BLOCKS)
    try:
        check_markers(args.root)
        found = stale(blocks, args.root)  # every block rendered (and refused) before anything is written
        figures = stale_figures(blocks, args.root)
        if args.check:
            for block, _, diff in found:
                print(f"stale: {block.page} block {block.name!r}\n{diff}")
            for block, _ in figures:
                print(f"stale: {block.figure.path}, the figure of block {block.name!r}: not what its records draw")
            print(f"{len(found)} of {len(blocks)} block(s) stale, {len(figures)} figure(s)" if found or figures
                  else f"all {len(blocks)} block(s) as rendered")
            return 1 if found or figures else 0
        pages_text: dict[Path, str] = {}
        for block, fresh, _ in found:
            page = args.root / block.page
            pages_text[page] = page_blocks.splice(pages_text.get(page, page.read_text()), block.name, fresh)
        for page, text in pages_text.items():
            rundir.write_text_atomic(page, text)
            print(f"wrote {page.relative_to(args.root)}")
        for block, drawn in figures:
            rundir.write_atomic(args.root / block.figure.path, drawn)
            print(f"wrote {block.figure.path}")
    except (ValueError, FileNotFoundError) as exc:
        print(f"{COMMAND}: {exc}", file=sys.stderr)
        return 2
    return 0
