"""Every evaluator of OSWorld's official task set against our registry: the metrics and getters
an offline-runnable task names exist, accept the task's options, and their getter configs
validate. Takes the task folder from ``OSWORLD_EXAMPLES`` (default
``../shared/osworld/evaluation_examples``) and skips when it is absent."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from osworld_gym.evaluators.metrics.options import unhonoured_options
from osworld_gym.tasks import evaluator_registry as registry
from osworld_gym.tasks.evaluator_spec import plan
from repo_paths import ROOT as REPO_ROOT

ROOT = Path(
    os.environ.get("OSWORLD_EXAMPLES", REPO_ROOT.parent / "shared/osworld/evaluation_examples")
)
pytestmark = pytest.mark.skipif(
    not (ROOT / "test_all.json").is_file(),
    reason=f"OSWorld's official task JSON not found at {ROOT} (set OSWORLD_EXAMPLES)",
)

#: Metrics not implemented, each for a reason a user can act on (see the report / README).
NOT_IMPLEMENTED = {
    "compare_audios": "needs librosa's MFCC + DTW",
    "compare_image_text": "needs OCR (easyocr)",
    "compare_videos": "needs OpenCV frame comparison",
    "compare_pdf_images": "needs PDF image extraction",
}
NOT_IMPLEMENTED_GETTERS = {
    "chrome_appearance_mode_ui": "probes Chrome's settings page through DevTools",
    "vm_window_size": "the guest has no window-geometry endpoint",
}


def official_tasks() -> Iterator[dict[str, Any]]:
    index = json.loads((ROOT / "test_all.json").read_text())
    for domain, ids in index.items():
        for task_id in ids:
            raw = json.loads((ROOT / "examples" / domain / f"{task_id}.json").read_text())
            raw.setdefault("domain", domain)
            yield raw


def _external(raw: dict[str, Any]) -> bool:
    from osworld_gym.support.classifier import classify

    reasons = classify(raw, "local").reasons
    return any(
        r.startswith(
            ("needs a live website", "needs VS Code", "needs a Google account", "needs GNOME")
        )
        for r in reasons
    )


def test_offline_official_evaluators_name_only_implemented_metrics_and_getters():
    missing: dict[str, int] = {}
    checked = 0
    for raw in official_tasks():
        if _external(raw):
            continue
        ev = raw["evaluator"]
        funcs = ev["func"] if isinstance(ev["func"], list) else [ev["func"]]
        getters = [
            g.get("type")
            for k in ("result", "expected")
            for g in (ev.get(k) if isinstance(ev.get(k), list) else [ev.get(k)])
            if isinstance(g, dict)
        ]
        missing_here = [f for f in funcs if not registry.has_metric(f)]
        missing_here += [g for g in getters if not registry.has_getter(g)]
        for f in missing_here:
            missing[f] = missing.get(f, 0) + 1
        if missing_here:
            continue
        # getters known, required keys present (postconfig steps are the setup runner's)
        p = plan({k: v for k, v in ev.items() if k != "postconfig"}, task_id=raw["id"])
        bad = [
            f"{spec.func}({o})"
            for spec in p.metrics
            for o in unhonoured_options(registry.metric(spec.func), spec.options)
        ]
        for b in bad:
            missing[b] = missing.get(b, 0) + 1
        checked += not bad
    known = set(NOT_IMPLEMENTED) | set(NOT_IMPLEMENTED_GETTERS)
    assert set(missing) <= known, sorted(set(missing) - known)
    assert checked >= 255, checked


def test_every_registered_name_resolves_to_a_callable():
    for name in registry.metric_names():
        assert callable(registry.metric(name)), name
    for name in registry.getter_names():
        assert callable(registry.getter(name)), name
