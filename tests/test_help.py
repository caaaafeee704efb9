"""`python launch.py --help` is for people: groups one line each, the common keys with their
meaning and the value the command would run with, where the rest is. Which keys is the `help`
mark on their fields; what each means is the comment ending its line in its YAML."""

from __future__ import annotations

import dataclasses

from ppo_lab.config import PPOConfig, help_keys
from ppo_lab.config_keys import CONF_DIR, inline_meanings
from ppo_lab.launching.help import GROUPS, help_text


def test_help_names_groups_and_common_keys_with_their_values():
    text = help_text(["experiment=cartpole"])
    lines = text.splitlines()
    keys = help_keys()
    assert len(lines) < 60 and len(keys) == 20
    for group in GROUPS:
        assert sum(line.startswith(f"  {group} ") for line in lines) == 1, group
    by_key = {line.split()[0]: line.split(maxsplit=2)[1:] for line in lines if line.startswith("  ") and line.split()[0] in keys}
    assert list(by_key) == keys
    assert by_key["ppo.num_envs"][0] == "16" and by_key["ppo.total_timesteps"][0] == "500000"  # CartPole's, composed
    assert by_key["ppo.gamma"][1].strip() == "discount"  # from conf/ppo/default.yaml's line
    assert "(no meaning" not in text
    assert "hardware.num_envs" not in by_key and "--cfg job" in text and "+tags." in text


def test_every_ppo_key_says_what_it_means_on_its_line():
    meanings = inline_meanings(CONF_DIR / "ppo" / "default.yaml")
    assert [f.name for f in dataclasses.fields(PPOConfig) if not meanings.get(f.name)] == []
