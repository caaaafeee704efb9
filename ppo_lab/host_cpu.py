"""The host CPU as XLA's CPU compiler sees it: what a run's numbers depend on besides code,
packages and flags.

XLA:CPU compiles for the machine it runs on (LLVM's host CPU name and features), so the same
program on a CPU with other vector instructions (AVX-512 or only AVX2, another vendor's cost
model) may sum in another order and move a float32 metric in its last digits. Seen here: every
recorded tiny run, bit-equal on one 2-core Intel Xeon, differed from update 1 or 2 on a 2-core
AMD EPYC (AVX2), by 1e-7 to 4e-3 relative. `manifest.json` records this (`cpu`), so `ppo-lab
reproduce` names a changed CPU as what may explain a difference, and the bit-for-bit tests keep
one recording per CPU (`tests/fixtures/*/<cpu_id>/`).

No jax here: read from /proc/cpuinfo (Linux), else from `platform`.
"""

from __future__ import annotations

import platform
from pathlib import Path

# Instruction-set features that change the code XLA:CPU generates (vector width, fused
# multiply-add, reduced-precision dot products). Others (crypto, virtualisation) do not.
ISA_FEATURES = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_bf16",
                "avx512_fp16", "avx512_vnni", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8",
                "asimd", "sve", "sve2", "bf16", "i8mm")  # the last five: aarch64


def _cpuinfo(path: Path = Path("/proc/cpuinfo")) -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (empty where there is none)."""
    fields: dict[str, str] = {}
    try:
        text = path.read_text()
    except OSError:
        return fields
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor is enough: the cores of one host are alike
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_record(cpuinfo: dict[str, str] | None = None) -> dict:
    """{machine, vendor, model_name, family, model, isa}: null where the system does not say."""
    info = _cpuinfo() if cpuinfo is None else cpuinfo
    flags = set((info.get("flags") or info.get("Features") or "").split())
    return {
        "machine": platform.machine() or None,
        "vendor": info.get("vendor_id") or info.get("CPU implementer") or None,
        "model_name": info.get("model name") or platform.processor() or None,
        "family": info.get("cpu family") or info.get("CPU architecture") or None,
        "model": info.get("model") or info.get("CPU part") or None,
        "isa": [f for f in ISA_FEATURES if f in flags],
    }


def cpu_id(record: dict) -> str:
    """A short name for a record, usable as a folder name: machine, vendor, family and model, and
    the widest vector extension (`x86_64-AuthenticAMD-25-1-avx2`). Fields a record lacks are
    left out (an older recording that knew only the vendor: `x86_64-GenuineIntel`)."""
    isa = record.get("isa")
    widest = None
    if isa:
        widest = next((f for f in ("amx_tile", "avx512f", "avx2", "avx", "sse4_2", "sve2", "sve", "asimd") if f in isa), None)
        widest = {"amx_tile": "amx", "avx512f": "avx512"}.get(widest, widest)
    parts = [record.get("machine"), record.get("vendor"), record.get("family"), record.get("model"), widest]
    return "-".join(str(p).replace(" ", "_") for p in parts if p)


def same_cpu(recorded: dict, here: dict) -> bool:
    """Whether a recording was made on a CPU like this one: every field it records is equal and
    it records the model (a recording that knew only the vendor matches no CPU exactly)."""
    if not recorded.get("model") or not recorded.get("isa"):
        return False
    return all(here.get(k) == v for k, v in recorded.items() if k != "model_name")
