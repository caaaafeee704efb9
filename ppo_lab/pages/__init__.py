"""The docs pages' figures, rendered from records committed in the repository.

Every table or figure a page of docs/ (and the README) shows of a measurement sits in a block,
`<!-- NAME:start -->` ... `<!-- NAME:end -->` (`analysis/page_blocks.py`), that a renderer writes
from records: the small files `ppo-lab record` keeps of finished runs (docs/records/<page>/...),
or a benchmark's JSON. `ppo-lab docs` re-renders every block (`--check`: says which are stale,
writes nothing); tests/test_docs.py checks that each page holds exactly what its records render.
Tables and numbers are written by `ppo_lab.judging.tables`, as every report writes them.

    registry     each block: its name, page, records and renderer (those of the pages another
                 module renders: README.md, docs/statistics.md, docs/results-zoo.md)
    command      `ppo-lab docs`
    <page>       a renderer module per other page (performance, results, ...)
"""
