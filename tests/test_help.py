"""`python launch.py --help` is for people: groups one line each, the common keys with their
meaning and the value the command would run with, where the rest is."""

from __future__ import annotations

from ppo_lab.launching.help import GROUPS, KEYS, help_text


def test_help_names_groups_and_common_keys_with_their_values():
    text = help_text(["experiment=cartpole"])
    lines = text.splitlines()
    assert len(lines) < 60 and len(KEYS) == 20
    for group in GROUPS:
        assert sum(line.startswith(f"  {group} ") for line in lines) == 1, group
    by_key = {line.split()[0]: line.split()[1] for line in lines if line.startswith("  ") and line.split()[0] in KEYS}
    assert set(by_key) == set(KEYS)
    assert by_key["ppo.num_envs"] == "16" and by_key["ppo.total_timesteps"] == "500000"  # CartPole's, composed
    assert "hardware.num_envs" not in by_key and "--cfg job" in text and "+tags." in text
