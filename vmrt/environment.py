"""Switches vmrt reads from the environment, parsed one way everywhere."""

from __future__ import annotations

import os

#: Values that turn a switch off (case and surrounding spaces aside).
OFF_VALUES = ("0", "off", "false", "no")


def switched_on(name: str) -> bool:
    """Whether the environment switch `name` (VMRT_CACHE, VMRT_POOL_PIN) is on: unset,
    or set to anything but OFF_VALUES."""
    return os.environ.get(name, "1").strip().lower() not in OFF_VALUES
