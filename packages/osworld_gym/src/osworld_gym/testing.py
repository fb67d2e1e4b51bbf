"""Helpers for tests and doctests (no desktop needed)."""

from __future__ import annotations

#: An infeasible task: FAIL scores 1, anything else 0. Runs on any provider, including "fake".
FAKE_TASK: dict = {
    "id": "fake-always-fail",
    "instruction": "Turn on the Bluetooth of this machine (it has none).",
    "snapshot": "os",
    "related_apps": ["os"],
    "config": [],
    "evaluator": {"func": "infeasible"},
}
