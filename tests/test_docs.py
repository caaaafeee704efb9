"""The pages under docs/ hold commands users copy and figures users quote: every `python launch.py`
command shown there names real keys (and a single run composes and validates), every `ppo-lab`
command's arguments parse, and every figure a page shows of a measurement is in a block that
holds exactly what `ppo-lab docs` renders from the records it names. All in-process: no command
is run."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from ppo_lab.analysis import coverage, page_blocks
from ppo_lab.bench import markdown
from ppo_lab.cli import SUBCOMMANDS
from ppo_lab.launching.command_line import check_overrides, config_source
from ppo_lab.pages import command as docs_command
from ppo_lab.judging import tables
from ppo_lab.pages.command import check_markers
from ppo_lab.pages.registry import BLOCKS, NAMES

from conftest import ROOT, run_config

DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
PROMPTS = ("python launch.py ", "ppo-lab ")
# Commands whose config the page itself writes first (a worked example), so they name no file here.
WORKED_EXAMPLES = {("envs.md", "python launch.py env=corridor"), ("envs.md", "ppo-lab train env=corridor")}
# Pages whose commands their own test runs, from the project folder they write (tests/test_project.py).
RUN_BY_THEIR_TEST = ("project.md",)


def _clean(line: str) -> str:
    line = line.split("  #")[0].split(" # ")[0].strip()
    return line.split("&& ", 1)[-1].strip()


def shown_commands(text: str) -> list[str]:
    """The commands a page shows: lines of its code blocks (fenced or indented, a trailing `\\`
    joining the next line) and inline code spans that start with a prompt. Spans with `...` or
    `[...]` are elisions of a command, not commands."""
    found = []
    for block in re.findall(r"```(?:bash|sh)?\n(.*?)```", text, re.S) + re.findall(r"(?m)((?:^    \S.*\n)+)", text):
        joined = re.sub(r"\\\n\s*", " ", block)
        found += [_clean(line) for line in joined.splitlines()]
    spans = re.findall(r"`([^`]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    found += [_clean(" ".join(span.split())) for span in spans]
    found = [c.rstrip('"') for c in found]  # a command quoted inside another (ssh --command "...")
    return [c for c in found if c.startswith(PROMPTS) and "..." not in c and " [" not in c and "|" not in c]


def commands_of(prompt: str) -> list[tuple[str, str]]:
    return sorted({(page.name, c) for page in PAGES for c in shown_commands(page.read_text()) if c.startswith(prompt)})


def test_the_pages_show_commands_of_both_kinds():
    assert len(commands_of("python launch.py")) > 40 and len(commands_of("ppo-lab")) > 10


@pytest.mark.parametrize("page,command", commands_of("python launch.py") + commands_of("ppo-lab train"))
def test_every_launch_command_in_the_docs_names_real_keys_and_composes(page, command):
    """`python launch.py ARGS` and `ppo-lab train ARGS` alike: one command."""
    if (page, command) in WORKED_EXAMPLES or page in RUN_BY_THEIR_TEST:
        return
    args = shlex.split(command)[2:]
    overrides = [a for a in args if "=" in a and not a.startswith("-")]
    check_overrides(overrides, *config_source(args))
    if "-m" in args or "-cd" in args or any(o.startswith("hydra/") for o in overrides):
        return  # a multirun's sweeps are not one config; its keys are checked above
    if {"--help", "--cfg"} & set(args):
        return
    run_config(overrides)


class _Parsed(Exception):
    pass


@pytest.mark.parametrize("page,command", commands_of("ppo-lab"))
def test_every_ppo_lab_command_in_the_docs_parses(page, command, monkeypatch):
    """The subcommand exists and argparse accepts the arguments shown; parsing stops the command."""
    args = shlex.split(command)[1:]
    if args in ([], ["--help"]) or args[0] == "train":  # train's arguments are Hydra's: composed above
        return
    assert args[0] in SUBCOMMANDS, f"{page}: unknown ppo-lab command {args[0]!r}"
    if len(args) == 1:
        return  # the command named, not run: its name is what the page relies on
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, argv=None, namespace=None):
        original(self, argv, namespace)
        raise _Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    command, _ = SUBCOMMANDS[args[0]]
    with pytest.raises(_Parsed):
        command(args[1:])


def test_a_file_that_is_not_a_benchmark_is_refused_naming_what_is_valid(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"rows": [{"seeds": 1}]}')
    with pytest.raises(ValueError, match="expected a suite run"):
        markdown.render_file(bad)


def test_the_coverage_record_holds_every_family_at_every_n():
    """docs/statistics.md's coverage block (rendered by the test below) holds what the check asserts."""
    record = json.loads(coverage.RECORD.read_text())
    assert record["families"] == [f.name for f in coverage.FAMILIES]
    means = {(r["family"], r["n"]) for r in record["rows"] if r["estimate"] == "mean"}
    assert means == {(f.name, n) for f in coverage.FAMILIES for n in coverage.NS}


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.name)
def test_every_rendered_block_is_what_its_records_render(block):
    """Each figure a page shows of a measurement is rendered from records committed beside it:
    the page holds exactly what `ppo-lab docs` renders from them today."""
    held = page_blocks.current((ROOT / block.page).read_text(), block.name)
    assert held == block.text(ROOT), f"{block.page}: block {block.name!r} is not what its records render: run ppo-lab docs"


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.figure], ids=lambda b: b.name)
def test_every_figure_is_what_its_records_draw(block):
    """A block's figure is committed beside its page, linked by the block, and byte for byte
    what `ppo-lab docs` draws from the block's records today."""
    assert f"]({Path(block.figure.path).name})" in block.text(ROOT), "the block links its figure"
    assert (ROOT / block.figure.path).read_bytes() == block.figure.png(ROOT), \
        f"{block.figure.path} is not what the records of block {block.name!r} draw: run ppo-lab docs"


def test_ppo_lab_docs_names_a_stale_figure_and_draws_it_back(tmp_path, capsys):
    """On a copy of the pages and their records: a figure changed by hand is named by `--check`
    (nothing written), and a plain run draws it back from its records."""
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    block = NAMES["goodhart-overoptimisation"]  # the figure quickest to draw (each of the three runs draws it)
    figure = tmp_path / block.figure.path
    drawn = figure.read_bytes()
    figure.write_bytes(drawn[:-8])
    assert docs_command.main(["--check", "--root", str(tmp_path), block.name]) == 1
    assert f"stale: {block.figure.path}, the figure of block {block.name!r}" in capsys.readouterr().out
    assert figure.read_bytes() == drawn[:-8]
    assert docs_command.main(["--root", str(tmp_path), block.name]) == 0
    assert figure.read_bytes() == drawn
    assert docs_command.main(["--check", "--root", str(tmp_path), block.name]) == 0


def test_every_marked_block_has_a_renderer_and_every_renderer_its_block():
    check_markers(ROOT)


def test_ppo_lab_docs_names_a_stale_block_renders_it_and_refuses_a_block_it_cannot(tmp_path, capsys):
    """On a copy of the pages and their records: `--check` names the block a hand edit made stale
    and writes nothing; a plain run puts back what the records render; a block no renderer
    knows is refused before anything is written."""
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    page = tmp_path / "docs" / "results.md"
    rendered = page.read_text()
    block = page_blocks.current(rendered, "pendulum-parity")
    page.write_text(rendered.replace(block, block.replace("| PureJaxRL | 8 |", "| PureJaxRL | 9 |")))
    # Named, as the figure test's: every block is rendered by the tests above, each render is seconds.
    assert docs_command.main(["--check", "--root", str(tmp_path), "pendulum-parity"]) == 1
    out = capsys.readouterr().out
    assert "stale: docs/results.md block 'pendulum-parity'" in out and "-| PureJaxRL | 9 |" in out
    assert "| PureJaxRL | 9 |" in page.read_text()
    assert docs_command.main(["--root", str(tmp_path), "pendulum-parity"]) == 0
    assert page.read_text() == rendered
    assert docs_command.main(["--check", "--root", str(tmp_path), "pendulum-parity"]) == 0
    page.write_text(rendered + "\n<!-- made-up:start -->\n<!-- made-up:end -->\n")
    assert docs_command.main(["--root", str(tmp_path)]) == 2
    assert "docs/results.md: block 'made-up' has no renderer" in capsys.readouterr().err
    assert page.read_text().endswith("<!-- made-up:end -->\n")


def test_a_block_whose_markers_do_not_pair_is_named():
    with pytest.raises(ValueError, match="block 'a' starts but never ends"):
        page_blocks.block_names("<!-- a:start -->\ntext\n")
    with pytest.raises(ValueError, match="block 'b' starts inside block 'a'"):
        page_blocks.block_names("<!-- a:start -->\n<!-- b:start -->\n<!-- b:end -->\n<!-- a:end -->\n")
    with pytest.raises(ValueError, match="block 'a' appears twice"):
        page_blocks.block_names("<!-- a:start -->\n<!-- a:end -->\n<!-- a:start -->\n<!-- a:end -->\n")


def test_figures_are_written_to_their_significant_digits():
    assert tables.num(328.4) == "328" and tables.num(0.9854) == "0.985" and tables.num(-11.94) == "-11.9"
    assert tables.num(36672.0) == "36,672" and tables.num(float("nan")) == "-"
    # an interval at the decimals of its largest figure: the point is not given more digits than its ends
    assert tables.interval(0.0598, -5.4855, 5.6051) == "0.06 [-5.49, 5.61]"
    assert tables.interval(9.74, 9.59, 9.86) == "9.74 [9.59, 9.86]"
    assert tables.interval(500.0, float("nan"), float("nan")) == "500"
    assert tables.pvalue(0.0005) == "0.0005" and tables.pvalue(0.004) == "0.004" and tables.pvalue(0.26) == "0.26"


# A table row that quotes a measurement: an interval of a mean, a ratio to two decimals, a speed.
MEASURED = re.compile(r"-?\d[\d,.]*\s*\[[-+]?[\d.]+, [-+]?[\d.]+\]|\b\d+\.\d+x\b|\d[\d,]* steps/s|\bp = 0\.\d")


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_no_table_quotes_a_measurement_outside_a_rendered_block(page):
    """What a table measures comes from records: a row with an interval, a ratio or a speed lies
    in a block `ppo-lab docs` renders (tables of keys and choices are written by hand)."""
    text = page.read_text()
    for name in page_blocks.block_names(text):
        text = text.replace(page_blocks.current(text, name), "")
    rows = [line for line in text.splitlines() if line.startswith("|") and MEASURED.search(line)]
    assert not rows, f"{page.name}: measured rows outside a rendered block:\n" + "\n".join(rows)


def test_a_block_not_measured_yet_says_how_to_measure_it_and_shows_no_figure(tmp_path):
    """While none of a block's records is committed, a block that names how they are measured
    says so in one line; one record of several missing is still an error."""
    from ppo_lab.pages.block import Block

    block = Block("b", "docs/x.md", ("docs/records/x/a", "docs/records/x/b"), lambda root: "| 1.0 [0.9, 1.1] |",
                  measure="`python launch.py experiment=cartpole` measures it.")
    assert block.text(tmp_path) == ("<!-- b:start -->\n\nNot measured yet (no record `docs/records/x/a`, "
                                    "`docs/records/x/b`): `python launch.py experiment=cartpole` measures it.\n\n<!-- b:end -->\n")
    (tmp_path / "docs/records/x/a").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="no record docs/records/x/b"):
        block.text(tmp_path)
    with pytest.raises(FileNotFoundError, match="no record docs/records/x/a"):
        Block("c", "docs/x.md", ("docs/records/x/a",), block.render).text(tmp_path / "elsewhere")
