"""The command line's errors in the lab's one form: `error: ...` printed once, exit 2.

Before Hydra composes anything, `refuse_unknown_overrides` checks the overrides' keys and
group options against conf/ (`ppo_lab.config_keys`): a typo costs about a second, suggests
the key meant, and a multirun with one launches no job. What Hydra itself still refuses while
composing (a key under `hydra.`, a group option a sweep file names) comes back through
`lab_error` in the same form, Hydra's stack-trace hint left out.
"""

from __future__ import annotations

import re
import sys

from hydra.errors import CompactHydraException

from ppo_lab.config_keys import USER_NAMESPACE, UnknownKeyError, check_overrides, known_keys, suggest
from ppo_lab.errors import ConfigError

_NOT_IN_STRUCT = re.compile(r"full_key: (\S+)")


def overrides_of(argv: list[str]) -> list[str]:
    """The `key=value` overrides of a launch.py command line (Hydra's flags and their values
    such as `-cd sweeps` carry no `=` as a separate word, or start with `-`)."""
    return [a for a in argv if "=" in a and not a.startswith("-")]


def fail(message: object) -> None:
    """The lab's form of a user error: once on stderr, exit 2."""
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def refuse_unknown_overrides(argv: list[str]) -> None:
    try:
        check_overrides(overrides_of(argv))
    except ConfigError as exc:
        fail(exc)
    if any(a.lstrip("+").startswith("hardware.num_envs=") for a in overrides_of(argv)):
        print(NUM_ENVS_NOTE, file=sys.stderr, flush=True)


# Two names, two meanings: said when a user reaches for the one that may do nothing.
NUM_ENVS_NOTE = ("note: hardware.num_envs is the hardware preset's default for ppo.num_envs, used only where no "
                 "experiment or scale sets ppo.num_envs; to set the number of envs, use ppo.num_envs")


def lab_error(exc: BaseException) -> str | None:
    """Hydra's composition error as the lab says it, or None for any other error."""
    if not isinstance(exc, CompactHydraException):
        return None
    inner = exc
    while inner is not None:  # a lab error Hydra wrapped (a plugin refusing its config): said as itself
        if isinstance(inner, ConfigError):
            return str(inner)
        inner = inner.__cause__ or inner.__context__
    cause = exc.__cause__
    text = f"{exc}\n{cause}" if cause is not None else str(exc)
    found = _NOT_IN_STRUCT.search(text)
    if found and ("not in struct" in text or "not in '" in text):
        key = found.group(1)
        if key.split(".")[0] == USER_NAMESPACE:
            return f"{key} is a new key of your own: add it with a plus, +{key}=..."
        if key in known_keys():  # a real key, of a group option this command did not select
            section, name = key.split(".")[:2]
            select = f"logger=[csv,{name}]" if section == "logger" else f"the {section}=OPTION that has it"
            return f"{key} is not in this config: it belongs to another option of its group (select {select} first)"
        return str(UnknownKeyError(key, suggest(key)))
    return text.strip()
