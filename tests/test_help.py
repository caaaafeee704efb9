"""`python launch.py --help` is for people: groups one line each, the common keys with their
meaning and the value the command would run with, where the rest is. Which keys is the `help`
mark on their fields; what each means is the comment ending its line in its YAML."""

from __future__ import annotations

from ppo_lab.config import declared_keys, help_keys
from ppo_lab.config_keys import CONF_DIR, group_options, inline_meanings
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


# The sections whose keys are the lab's own (env, reward and logger keys are their parts').
LAB_SECTIONS = ("ppo", "network", "train", "eval", "health", "checkpoint", "hardware", "pbt")


def test_every_key_of_the_lab_says_what_it_means_on_its_line():
    """Every key a field declares has its one-line meaning at the end of its line, in each file
    of its group (conf/network/cnn.yaml as well as mlp.yaml), or in conf/config.yaml."""
    missing, keys = [], declared_keys()
    read_whole = [k.key + "." for k in keys if k.has("read")]  # `pbt.hypers`: its value's keys are the user's
    for declared in keys:
        group, _, name = declared.key.partition(".")
        if (declared.section is not None and not declared.has("read")) or declared.has("rest") \
                or declared.key.startswith(tuple(read_whole)) or (name and group not in LAB_SECTIONS):
            continue
        options = group_options(group) if name else None
        files = [CONF_DIR / group / f"{o}.yaml" for o in options] if options else [CONF_DIR / "config.yaml"]
        name = name if options else declared.key
        missing += [f"{path.relative_to(CONF_DIR)}: {name}" for path in files if not inline_meanings(path).get(name)]
    assert missing == []
    assert inline_meanings(CONF_DIR / "pbt" / "default.yaml")["perturb.factors"]  # a key of a mapping in its section
