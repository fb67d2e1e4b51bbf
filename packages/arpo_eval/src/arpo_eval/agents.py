"""The agents ``arpo-eval run --agent`` knows, behind the trainer's :class:`Agent` protocol.

Every agent has ``reset(task)`` and ``act(obs, info) -> str`` (the protocol of
:mod:`arpo_trainer.agent`, shared with the trainer), and one agent object drives one desktop at a
time. :func:`build_agent` turns an :class:`AgentSpec` into an :class:`AgentBundle`: a factory
(called once per desktop) and the action set the agent writes, which the desktops must parse.

==========  ============================================================  ===================
``--agent``  what it is                                                     action set
==========  ============================================================  ===================
``hf``       a transformers Qwen-VL checkpoint (``--model PATH`` or          ``uitars``
             ``tiny``) through arpo_trainer's :class:`PolicyAgent` (the
             trainer's prompt, image budget and token layout)
``openai``   an OpenAI-compatible chat-completions endpoint (vLLM serving   ``uitars``
             UI-TARS): :class:`arpo_eval.openai_agent.OpenAIChatAgent`
``oracle``   each task's built-in oracle (pyautogui: replayed verbatim;     ``pyautogui``
             other sets: arpo_trainer's :class:`OracleAgent` rendering)
``noop``     answers ``DONE`` at once                                       ``pyautogui``
``fail``     answers ``FAIL`` at once (scores exactly the infeasible tasks) ``pyautogui``
==========  ============================================================  ===================

>>> bundle = build_agent(AgentSpec("fail"))
>>> agent = bundle.factory()
>>> agent.reset(None); agent.act({}, {}), bundle.action_set, bundle.model_name
('FAIL', 'pyautogui', 'fail')
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

AGENTS = ("hf", "openai", "oracle", "noop", "fail")


class AgentError(RuntimeError):
    """The agent's backend failed (model server unreachable, bad reply): the episode has no score."""


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
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class AgentBundle:
    """A factory making one agent per desktop, and what the desktops need to know about it."""

    factory: Callable[[], Any]
    action_set: str
    action_set_kwargs: dict[str, Any]
    model_name: str
    describe: dict[str, Any] = field(default_factory=dict)


class NoopAgent:
    """Ends every episode at once with DONE (scores what an untouched desktop scores: 0)."""

    def reset(self, task: Any) -> None:
        pass

    def act(self, obs: dict[str, Any], info: dict[str, Any]) -> str:
        return "DONE"


class FailAgent:
    """Ends every episode at once with FAIL (scores 1 on exactly the infeasible tasks)."""

    def reset(self, task: Any) -> None:
        pass

    def act(self, obs: dict[str, Any], info: dict[str, Any]) -> str:
        return "FAIL"


class ReplayOracleAgent:
    """Replays a task's pyautogui oracle verbatim (waits included), then DONE (FAIL if infeasible).

    This is exactly what ``osworld-gym tasks check`` proves scores 1 on every built-in task.
    """

    def __init__(self) -> None:
        self._script: list[str] = []
        self._turn = 0

    def reset(self, task: Any) -> None:
        oracle = list(getattr(task, "oracle", None) or [])
        if not oracle:
            raise ValueError(f"task {getattr(task, 'id', task)!r} has no oracle to replay")
        final = "FAIL" if getattr(task, "is_infeasible", False) else "DONE"
        self._script = oracle if oracle[-1] in ("DONE", "FAIL") else [*oracle, final]
        self._turn = 0

    def act(self, obs: dict[str, Any], info: dict[str, Any]) -> str:
        text = self._script[self._turn] if self._turn < len(self._script) else "DONE"
        self._turn += 1
        return text


class LockedPolicy:
    """A policy shared by several desktops' agents: one ``sample`` call at a time."""

    def __init__(self, policy: Any):
        self.policy = policy
        self._lock = threading.Lock()

    def sample(self, contexts: list[Any], rows: list[int]) -> list[Any]:
        with self._lock:
            return self.policy.sample(contexts, rows)


def build_agent(spec: AgentSpec) -> AgentBundle:
    """An :class:`AgentBundle` for ``spec`` (heavy backends are imported only when needed).

    Raises:
        ValueError: unknown kind or missing options (the message says which flag to add).
    """
    kind = spec.kind
    if kind not in AGENTS:
        raise ValueError(f"unknown agent {kind!r}; choose one of {', '.join(AGENTS)}")
    if kind in ("noop", "fail", "oracle"):
        aset = spec.action_set or "pyautogui"
        cls: Callable[[], Any]
        if kind == "noop":
            cls = NoopAgent
        elif kind == "fail":
            cls = FailAgent
        elif aset == "pyautogui":
            cls = ReplayOracleAgent
        else:
            cls = _rendered_oracle(aset, spec.screen_size)
        return AgentBundle(cls, aset, {}, spec.name or kind, {"agent": kind})
    if kind == "openai":
        from arpo_eval.openai_agent import openai_bundle

        return openai_bundle(spec)
    return _hf_bundle(spec)


def _rendered_oracle(action_set: str, screen_size: tuple[int, int]) -> Callable[[], Any]:
    def make() -> Any:
        from arpo_trainer.agent import OracleAgent
        from osworld_gym.actions import make_action_set

        return OracleAgent(make_action_set(action_set, screen_size=screen_size))

    return make


def _hf_bundle(spec: AgentSpec) -> AgentBundle:
    """A transformers model as :class:`arpo_trainer.agent.PolicyAgent` (shared weights, one
    agent per desktop, generation serialized by a lock)."""
    import torch
    from arpo_trainer.agent import PolicyAgent
    from arpo_trainer.chat import TurnEncoder
    from arpo_trainer.generation import TransformersPolicy, turn_generation_config
    from osworld_gym.actions import make_action_set

    if not spec.model:
        raise ValueError("--agent hf needs --model (a checkpoint directory, a hub id, or 'tiny')")
    torch.manual_seed(spec.seed)
    if spec.model == "tiny":
        from arpo_trainer.tiny import build_tiny_vlm

        vlm = build_tiny_vlm(seed=spec.seed)
        model, processor = vlm.model, vlm.processor
    else:
        from arpo_trainer.modeling import load_model, load_processor

        model = load_model(spec.model, dtype=spec.dtype)
        processor = load_processor(spec.model)
    model.to(spec.device)
    aset_name = spec.action_set or "uitars"
    prompt = make_action_set(aset_name, screen_size=spec.screen_size).describe()
    encoder = TurnEncoder(processor, prompt, max_history_images=spec.history_images)
    aset_kwargs: dict[str, Any] = {}
    if aset_name == "uitars":  # coordinates live in the frame of the screenshot the model sees
        aset_kwargs = {"max_pixels": encoder.max_pixels, "min_pixels": encoder.min_pixels,
                       "factor": encoder.factor}
    gen = turn_generation_config(encoder, max_new_tokens=spec.max_tokens,
                                 temperature=spec.temperature, top_p=spec.top_p,
                                 do_sample=spec.temperature > 0)
    policy = LockedPolicy(TransformersPolicy(model, encoder, gen))

    def make() -> Any:
        return PolicyAgent(policy, encoder)

    name = spec.name or _model_name(spec.model)
    return AgentBundle(make, aset_name, aset_kwargs, name,
                       {"agent": "hf", "model": spec.model, "temperature": spec.temperature,
                        "top_p": spec.top_p, "max_tokens": spec.max_tokens,
                        "history_images": spec.history_images})


def _model_name(model: str) -> str:
    """A directory-safe ``<model>`` level from a path or hub id."""
    path = Path(model.rstrip("/"))
    name = path.name or "model"
    if name.startswith("checkpoint-") and path.parent.name:
        name = f"{path.parent.name}-{name}"
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
