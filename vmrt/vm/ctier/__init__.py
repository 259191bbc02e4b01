"""The C tier: VM functions compiled to C through cffi (see cgen.py, build.py,
runtime.py). VMRT_TIER picks the tier a context runs: `auto` (the default: C where
a compiler or a cached build is there), `c` or `python`."""

from __future__ import annotations

import os

from vmrt.errors import StatusCode, VmrtError

TIERS = ("auto", "c", "python")


def selected_tier() -> str:
    """VMRT_TIER, checked (a context reads it once, when it is made)."""
    return check_tier(os.environ.get("VMRT_TIER", "auto").strip().lower() or "auto",
                      "VMRT_TIER")


def check_tier(tier: str, what: str = "tier") -> str:
    if tier not in TIERS:
        raise VmrtError(f"{what}={tier!r}: expected one of {', '.join(TIERS)}",
                        StatusCode.INVALID_ARGUMENT)
    return tier
