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
from typing import TYPE_CHECKING, Any

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

# spelled out (not built from _EXPORTS) so that checkers read it; a test keeps them equal
__all__ = [
    "AgentSpec",
    "EpisodeRecord",
    "Protocol",
    "RunConfig",
    "baseline_stats",
    "build_agent",
    "compare_runs",
    "evaluate_agent",
    "export_dataset",
    "read_run",
    "run",
    "summarize",
    "write_report",
    "__version__",
]

if TYPE_CHECKING:  # the lazily exported names, for type checkers and editors
    from arpo_eval.agent_spec import AgentSpec
    from arpo_eval.agents import build_agent
    from arpo_eval.baseline import baseline_stats
    from arpo_eval.compare import compare_runs
    from arpo_eval.export import export_dataset
    from arpo_eval.layout import EpisodeRecord, read_run
    from arpo_eval.protocol import Protocol
    from arpo_eval.report import write_report
    from arpo_eval.run import RunConfig, run
    from arpo_eval.runner import evaluate_agent
    from arpo_eval.tables import summarize


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'arpo_eval' has no attribute {name!r}")
