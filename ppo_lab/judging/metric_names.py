"""What a metric is called on a figure or in a summary: a label and its unit, from its name.

Every plot of the lab labels its axes with `axis_label(metric)` (and legends, captions and
closing summaries with `label(metric)`), so that a figure reads `episode length [steps]` or
`true objective [per 1k steps]`, never a raw key such as `train/mean_episode_return`.

A name is read as `<family>/<leaf>`: the families of the metric scheme (docs/architecture.md)
say where a value came from (`train/`: the training rollouts, `eval/`: the final evaluation,
`true/`: the objective an env's reward stands for, `reward/`: what a reward function paid), the
leaf says what it is. Known leaves have their own words below; any other leaf reads as its
words, with the unit its suffix says (`_per_1k`: per 1k agent steps, `_frac`/`_share`: a
fraction). The evaluation's play (`_greedy`: argmax; `_sampled`: actions sampled from the
policy) is said after the label.
"""

from __future__ import annotations

from ppo_lab.estimators import play_of

# leaf -> (label, unit or None)
KNOWN = {
    "episode_return": ("episode return", None),
    "mean_episode_return": ("episode return", None),
    "episode_length": ("episode length", "steps"),
    "mean_episode_length": ("episode length", "steps"),
    "num_episodes": ("episodes ended", "per update"),
    "entropy": ("policy entropy", "nats"),
    "approx_kl": ("approximate KL", "nats"),
    "clip_frac": ("clipped fraction", "fraction"),
    "pg_loss": ("policy loss", None),
    "vf_loss": ("value loss", None),
    "explained_variance": ("explained variance", None),
    "learning_rate": ("learning rate", None),
    "ent_coef": ("entropy coefficient", None),
    "clip_eps": ("clip range", None),
    "sps": ("throughput", "env steps/s"),
    "invalid_frac": ("invalid actions", "fraction"),
    "paid_per_1k": ("paid reward", "per 1k steps"),
}
# family -> words said before the leaf's label (none: the leaf says it)
FAMILY_WORDS = {"true": "true", "criteria": "criterion:"}
PER_1K = "_per_1k"


def _words(leaf: str) -> str:
    return leaf.replace("_", " ").strip()


def label_and_unit(metric: str) -> tuple[str, str | None]:
    """(label, unit) of `metric`: `eval/episode_length` -> ("episode length", "steps")."""
    family, _, leaf = metric.rpartition("/")
    leaf, play = play_of(leaf)
    if family == "actions":  # one action's share of the rollout
        label, unit = KNOWN.get(leaf, (f"action {leaf}", "share of actions"))
    elif leaf in KNOWN:
        label, unit = KNOWN[leaf]
    elif leaf.endswith(PER_1K):
        label, unit = _words(leaf.removesuffix(PER_1K)), "per 1k steps"
    elif leaf.endswith(("_frac", "_share", "_fraction")) or leaf.startswith("frac_"):
        label, unit = _words(leaf), "fraction"
    else:
        label, unit = _words(leaf), None
    words = FAMILY_WORDS.get(family.split("/")[0])
    if words and not label.startswith(words):
        label = f"{words} {label}"
    if play:
        label += f" ({play} play)"
    return label, unit


def label(metric: str) -> str:
    """`true/objective_per_1k` -> `true objective per 1k steps`: the label with its unit in words."""
    text, unit = label_and_unit(metric)
    return f"{text} {unit}" if unit and unit.startswith("per ") else text


def axis_label(metric: str) -> str:
    """An axis's label: `episode length [steps]`, `true objective [per 1k steps]`."""
    text, unit = label_and_unit(metric)
    return f"{text} [{unit}]" if unit else text
