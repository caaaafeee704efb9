"""Is a logger's remote store there? A short, bounded check before anything is compiled.

A tracking store that does not answer must cost a run seconds, not its allocation: MLflow's
own HTTP client retries a request for minutes. So before the first compile each configured
remote store (an MLflow tracking URI over HTTP(S) or a database server, W&B in online mode)
is probed with `logger.<name>.connect_timeout_s` (default 10 s) as the bound on the whole
probe, name resolution included:

    logger.<name>.on_unreachable=error   (default) stop: StoreUnreachable, launch.py exits 2
                                         naming the URI and the error
    logger.<name>.on_unreachable=warn    go on without that logger; summary.json lists it
                                         under `loggers_disabled`

Local stores (MLflow's SQLite file, offline W&B, TensorBoard) are not probed. What happens
when a store goes away later, mid-run, is the recorders' (`LoggerRecorder` disables that
logger after one failed chunk).
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request

from ppo_lab.errors import ConfigError
from ppo_lab.estimators import finite_number

log = logging.getLogger(__name__)

ON_UNREACHABLE = ("error", "warn")
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_ON_UNREACHABLE = "error"
WANDB_DEFAULT_URL = "https://api.wandb.ai"
# Database URIs MLflow accepts as tracking stores (SQLAlchemy), by their default ports.
DB_PORTS = {"postgresql": 5432, "mysql": 3306, "mssql": 1433}


class StoreUnreachable(RuntimeError):
    """A configured tracking store did not answer within its timeout (launch.py exits 2)."""


def store_policy(name: str, options) -> tuple[float, str]:
    """(connect_timeout_s, on_unreachable) of logger `name`, checked (ConfigError names the
    key, the value and what is valid)."""
    options = {k: v for k, v in dict(options or {}).items() if v is not None}  # null: the default
    timeout = options.get("connect_timeout_s", DEFAULT_TIMEOUT_S)
    if not finite_number(timeout) or timeout <= 0:
        raise ConfigError(f"logger.{name}.connect_timeout_s", timeout, "seconds > 0 (default 10)")
    policy = options.get("on_unreachable", DEFAULT_ON_UNREACHABLE)
    if policy not in ON_UNREACHABLE:
        raise ConfigError(f"logger.{name}.on_unreachable", policy, "error or warn")
    return float(timeout), policy


def remote_store(name: str, options) -> str | None:
    """The URI of logger `name`'s remote store, or None when it writes locally."""
    options = dict(options or {})
    if name == "mlflow":
        uri = options.get("tracking_uri")
        if not uri:
            return None  # the default SQLite file under logger.mlflow.dir
        scheme = urllib.parse.urlsplit(str(uri)).scheme.split("+")[0].lower()
        return str(uri) if scheme in ("http", "https", *DB_PORTS) else None
    if name == "wandb":
        if options.get("mode", "offline") != "online":
            return None
        return os.environ.get("WANDB_BASE_URL") or WANDB_DEFAULT_URL
    return None


def _probe(uri: str, timeout: float) -> None:
    """Raises OSError (or a subclass: URLError, TimeoutError, ...) if `uri` does not answer."""
    parts = urllib.parse.urlsplit(uri)
    scheme = parts.scheme.split("+")[0].lower()
    if scheme in ("http", "https"):
        request = urllib.request.Request(uri, method="GET", headers={"User-Agent": "ppo_lab-store-check"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                response.read(1)
        except urllib.error.HTTPError:
            return  # the server answered (404, 401, ...): it is there
        return
    port = parts.port or DB_PORTS.get(scheme)
    if not parts.hostname or not port:
        raise OSError(f"no host and port in {uri!r}")
    socket.create_connection((parts.hostname, port), timeout=timeout).close()


def probe(uri: str, timeout: float) -> str | None:
    """None if the store at `uri` answers within `timeout` seconds, else why not. The bound
    holds for the whole probe: name resolution has no timeout of its own, so the probe runs
    in a daemon thread that is abandoned when the time is up."""
    result: queue.Queue = queue.Queue(maxsize=1)

    def run():
        try:
            _probe(uri, timeout)
            result.put(None)
        except Exception as exc:  # noqa: BLE001 - every failure is an answer: the store is not there
            reason = getattr(exc, "reason", None)  # urllib's URLError wraps the socket's error
            cause = reason if isinstance(reason, BaseException) else exc
            result.put(f"{type(cause).__name__}: {cause}")

    threading.Thread(target=run, name=f"store-check {uri}", daemon=True).start()
    try:
        return result.get(timeout=timeout + 0.5)
    except queue.Empty:
        return f"no answer within {timeout:g} s"


def check_stores(loggers) -> tuple[dict, list[dict]]:
    """(the loggers to use, the ones disabled: [{logger, uri, error, when}]) after probing each
    remote store; StoreUnreachable for an unreachable one whose on_unreachable is error.
    Every logger's connect_timeout_s / on_unreachable is checked, local ones too."""
    kept, disabled = {}, []
    for name, spec in dict(loggers or {}).items():
        timeout, policy = store_policy(name, spec.options)
        uri = remote_store(name, spec.options)
        error = probe(uri, timeout) if uri else None
        if error is None:
            kept[name] = spec
            continue
        if policy == "error":
            raise StoreUnreachable(
                f"logger.{name}: the store at {uri} is unreachable ({error}; connect_timeout_s={timeout:g}). "
                f"Nothing was trained. Ways forward: start the store or fix the URI; train without it with "
                f"logger.{name}.on_unreachable=warn (summary.json lists it under loggers_disabled); or leave "
                f"{name} out of logger=[...].")
        log.warning("logger %s disabled: the store at %s is unreachable (%s); training without it "
                    "(logger.%s.on_unreachable=warn)", name, uri, error, name)
        disabled.append({"logger": name, "uri": uri, "error": error, "when": "start"})
    return kept, disabled
