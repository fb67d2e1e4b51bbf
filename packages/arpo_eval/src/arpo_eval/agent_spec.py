"""What ``arpo-eval run --agent`` builds: :class:`AgentSpec` in, :class:`AgentBundle` out.

Kept apart from the agents themselves so that agent backends (:mod:`arpo_eval.openai_agent`)
and the registry that builds them (:mod:`arpo_eval.agents`) both import it, not each other.

>>> AgentSpec("noop").kind in AGENTS
True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: The extra that installs the trainer (torch, transformers, TRL) for ``--agent hf``.
HF_EXTRA = "arpo-eval[hf]"

AGENTS = ("hf", "openai", "oracle", "noop", "fail")


class AgentError(RuntimeError):
    """The agent's backend failed (model server unreachable, bad reply): the episode has no
    score."""


@dataclass
class AgentSpec:
    """How to build an agent (the ``run`` command's agent options).

    Attributes:
        kind: one of :data:`AGENTS`.
        model: ``hf``: a checkpoint directory/hub id or ``tiny``; ``openai``: the served model
            name (vLLM ``--served-model-name``).
        base_url: ``openai``: the endpoint, e.g. ``http://127.0.0.1:9000/v1``.
        api_key: ``openai``: bearer token (vLLM accepts anything; default ``$OPENAI_API_KEY``
            or ``EMPTY``).
        temperature / top_p / max_tokens: sampling per turn (ARPO evaluates at 0.6 / 0.9 / 512+).
        history_images: screenshots kept in the context (the latest ones; ARPO 15).
        action_set: override the agent's action set.
        screen_size: desktop size, for action sets with coordinates.
        device: ``hf``: torch device (``cpu``, ``cuda``).
        dtype: ``hf``: weights dtype (``auto``, ``bfloat16``, ``float32``).
        request_timeout: ``openai``: seconds per HTTP request.
        retries: ``openai``: attempts per turn on connection errors, 429 and 5xx.
        name: the ``<model>`` level of the result layout (default: derived from ``model``).
        action_grammar: ``hf`` with the ``uitars`` action set: sample every turn under the
            UI-TARS grammar (``arpo_trainer.grammar``), as a policy trained with the trainer's
            ``action_grammar`` was.
    """

    kind: str
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    temperature: float = 0.6
    top_p: float = 0.9
    max_tokens: int = 1024
    history_images: int = 15
    action_set: str | None = None
    screen_size: tuple[int, int] = (1920, 1080)
    device: str = "cpu"
    dtype: str = "auto"
    request_timeout: float = 120.0
    retries: int = 3
    seed: int = 0
    name: str | None = None
    action_grammar: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class AgentBundle:
    """A factory making one agent per desktop, and what the desktops need to know about it."""

    factory: Callable[[], Any]
    action_set: str
    action_set_kwargs: dict[str, Any]
    model_name: str
    describe: dict[str, Any] = field(default_factory=dict)
