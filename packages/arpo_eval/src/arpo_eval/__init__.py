"""arpo-eval: evaluate GUI agents on OSWorld-format desktops, and read the results.

Modules, one concept each: :mod:`.protocol` (how the step limit is scored: OSWorld /
OSWorld Hard), :mod:`.agent_spec` (what ``--agent`` builds), :mod:`.agents` (hf, oracle, noop,
fail; osworld-gym's Agent protocol),
:mod:`.openai_agent` (chat-completions endpoints), :mod:`.runner` (``evaluate_agent``: tasks x
trials on parallel desktops), :mod:`.layout` (the result directory), :mod:`.tasks` (task specs),
:mod:`.tables` (mean@k, pass@k, splits), :mod:`.run` (the ``run`` command), :mod:`.report`
(report.html), :mod:`.plots`, :mod:`.compare` (paired bootstrap), :mod:`.export` (HF datasets),
:mod:`.baseline` (task-selection statistics), :mod:`.cli` (``arpo-eval``).

>>> from arpo_eval import Protocol, evaluate_agent
>>> Protocol("hard")
<Protocol.HARD: 'hard'>
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "AgentSpec": "arpo_eval.agent_spec",
    "EpisodeRecord": "arpo_eval.layout",
    "Protocol": "arpo_eval.protocol",
    "RunConfig": "arpo_eval.run",
    "baseline_stats": "arpo_eval.baseline",
    "build_agent": "arpo_eval.agents",
    "compare_runs": "arpo_eval.compare",
    "evaluate_agent": "arpo_eval.runner",
    "export_dataset": "arpo_eval.export",
    "read_run": "arpo_eval.layout",
    "run": "arpo_eval.run",
    "summarize": "arpo_eval.tables",
    "write_report": "arpo_eval.report",
}

__all__ = [*sorted(_EXPORTS), "__version__"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'arpo_eval' has no attribute {name!r}")
