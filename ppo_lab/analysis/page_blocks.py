"""Blocks of a docs page that a command writes: the text between `<!-- NAME:start -->` and
`<!-- NAME:end -->`, markers included, rendered from committed records (`ppo-lab docs`,
`ppo_lab/pages/`); what a page holds outside its blocks is written by hand. Text only: no
records are read here.
"""

from __future__ import annotations

import re

MARKER = re.compile(r"<!-- ([A-Za-z0-9_.-]+):(start|end) -->")


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def wrap(name: str, body: str) -> str:
    """A block: `body` between the markers of `name`, each on a line of its own."""
    start, end = markers(name)
    return f"{start}\n\n{body.strip()}\n\n{end}\n"


def block_names(page: str) -> list[str]:
    """The names of the page's blocks in order; ValueError naming a marker left open, closed
    without a start, nested in another block or used twice."""
    names: list[str] = []
    open_name = None
    for match in MARKER.finditer(page):
        name, kind = match.groups()
        if kind == "start":
            if open_name is not None:
                raise ValueError(f"block {name!r} starts inside block {open_name!r}")
            if name in names:
                raise ValueError(f"block {name!r} appears twice")
            open_name = name
        elif name != open_name:
            raise ValueError(f"block {name!r} ends where {'no block' if open_name is None else repr(open_name)} is open")
        else:
            names.append(name)
            open_name = None
    if open_name is not None:
        raise ValueError(f"block {open_name!r} starts but never ends ({markers(open_name)[1]})")
    return names


def current(page: str, name: str) -> str | None:
    """The block `name` as the page holds it, markers included (and the end marker's newline);
    None where the page has no such block."""
    start, end = markers(name)
    if start not in page or end not in page.split(start, 1)[1]:
        return None
    inner = page.split(start, 1)[1].split(end, 1)[0]
    return start + inner + end + "\n"


def splice(page: str, name: str, block: str) -> str:
    """`page` with its block `name` replaced by `block` (markers included); ValueError where
    the page has no such block: a block belongs where its page put its markers."""
    start, end = markers(name)
    if current(page, name) is None:
        raise ValueError(f"the page has no {start} ... {end} markers to write the block between")
    head, rest = page.split(start, 1)
    return head + block.rstrip("\n") + rest.split(end, 1)[1]
