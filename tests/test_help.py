"""`python launch.py --help` is for people: groups one line each, the common keys with their
meaning and the value the command would run with, where the rest is. Which keys is the `help`
mark on their fields; what each means is the comment ending its line in its YAML."""

from __future__ import annotations

from omegaconf import OmegaConf

from conftest import ppo_lab, write_docs_env
from ppo_lab.config import TORSO_KEYS, declared_keys
from ppo_lab.launching.help import help_keys
from ppo_lab.config_keys import CONF_DIR, group_options
from ppo_lab.launching.help import GROUPS, help_text, inline_meanings


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


# The sections whose keys are the lab's own (env, reward and logger keys are their parts', local the machine's).
LAB_SECTIONS = ("ppo", "network", "train", "eval", "health", "checkpoint", "hardware", "pbt")
TOP_FILES = [CONF_DIR / "config.yaml", CONF_DIR / "hydra" / "sweeper" / "optuna.yaml"]  # the latter: `optimize`


def _writes(path, dotted: str) -> bool:
    *parents, last = dotted.split(".")
    node = OmegaConf.load(path)
    for name in parents:
        node = node.get(name) if OmegaConf.is_dict(node) else None
    return OmegaConf.is_dict(node) and last in node


def test_every_key_of_the_lab_says_what_it_means_on_its_line():
    """Every key a dataclass declares is written by a file of its group (or conf/config.yaml),
    with its one-line meaning at the end of its line in each file that writes it
    (conf/network/cnn.yaml as well as mlp.yaml; a torso's own sizes where that torso is)."""
    missing = []
    for key, field in declared_keys().items():
        group, _, name = key.partition(".")
        if (name and group not in LAB_SECTIONS) or (not name and group in [*LAB_SECTIONS, "env", "reward", "logger", "local"]):
            continue
        options = group_options(group) if name else None
        files = [CONF_DIR / group / f"{o}.yaml" for o in options] if options else TOP_FILES
        name = name if options else key
        writing = [path for path in files if _writes(path, name)]
        missing += [f"{path.relative_to(CONF_DIR)}: {name}" for path in writing if not inline_meanings(path).get(name)]
        missing += [f"no file of {group}/ writes {name}"] if not writing and name not in TORSO_KEYS else []
    assert missing == []
    assert inline_meanings(CONF_DIR / "pbt" / "default.yaml")["perturb.factors"]  # a key of a mapping in its section


def test_ppo_lab_train_help_names_itself_and_a_projects_own_options(tmp_path):
    """The installed command's help, from a project folder: its conf/ on the search path."""
    write_docs_env(tmp_path)
    shown = ppo_lab(["train", "env=corridor", "--help"], tmp_path)
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert shown.stdout.startswith("usage: ppo-lab train [group=option ...]")
    [line] = [line for line in shown.stdout.splitlines() if line.startswith("  env ")]
    assert "corridor, " in line and line.endswith("(now corridor)")
