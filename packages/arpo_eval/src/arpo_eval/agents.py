"""The agents ``arpo-eval run --agent`` knows, behind osworld-gym's :class:`Agent` protocol.

Every agent has ``reset(task)`` and ``act(obs, info) -> str`` (the protocol of
:mod:`osworld_gym.episodes`, shared with ``osworld-gym tasks check`` and the trainer), and one
agent object drives one desktop at a time. :func:`build_agent` turns an :class:`AgentSpec` into an
:class:`AgentBundle`: a factory (called once per desktop) and the action set the agent writes,
which the desktops must parse.

==========  ============================================================  ===================
``--agent``  what it is                                                     action set
==========  ============================================================  ===================
``hf``       a transformers Qwen-VL checkpoint (``--model PATH`` or          ``uitars``
             ``tiny``) through arpo_trainer's :class:`PolicyAgent` (the
             trainer's prompt, image budget and token layout; needs the
             ``arpo-eval[hf]`` extra: torch, transformers, TRL)
``openai``   an OpenAI-compatible chat-completions endpoint (vLLM serving   ``uitars``
             UI-TARS): :class:`arpo_eval.openai_agent.OpenAIChatAgent`
``oracle``   each task's built-in oracle (pyautogui: replayed verbatim;     ``pyautogui``
             other sets: osworld-gym's :class:`OracleAgent` rendering)
``noop``     answers ``DONE`` at once                                       ``pyautogui``
``fail``     answers ``FAIL`` at once (scores exactly the infeasible tasks) ``pyautogui``
==========  ============================================================  ===================

Only ``hf`` imports the trainer (and torch); the others run without it installed.

>>> bundle = build_agent(AgentSpec("fail"))
>>> agent = bundle.factory()
>>> agent.reset(None); agent.act({}, {}), bundle.action_set, bundle.model_name
('FAIL', 'pyautogui', 'fail')
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osworld_gym.episodes import FailAgent, NoopAgent, OracleAgent, ReplayOracleAgent
from osworld_gym.errors import MissingDependencyError

from arpo_eval.agent_spec import AGENTS, HF_EXTRA, AgentBundle, AgentError, AgentSpec

if TYPE_CHECKING:  # the hf agent's torch, imported there only when it runs
    from torch import nn

__all__ = [
    "AGENTS",
    "HF_EXTRA",
    "AgentBundle",
    "AgentError",
    "AgentSpec",
    "FailAgent",
    "LockedPolicy",
    "NoopAgent",
    "OracleAgent",
    "ReplayOracleAgent",
    "build_agent",
    "trainer_module",
]

log = logging.getLogger(__name__)

_HEAVY = ("arpo_trainer", "torch", "transformers", "trl")


def trainer_module(name: str, *, what: str = "--agent hf") -> Any:
    """Import ``name`` (an ``arpo_trainer`` module, or torch) for ``what``.

    Raises:
        MissingDependencyError: the trainer or one of its libraries is not installed; the
            message names the extra that installs them.
    """
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] not in _HEAVY:
            raise
        raise MissingDependencyError(
            f"{what} needs the trainer and its model libraries ({e.name} is missing); install "
            f"the {HF_EXTRA} extra: pip install '{HF_EXTRA}' (in this repository: uv sync "
            "--all-packages, which installs it)"
        ) from e


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
        from osworld_gym.actions import make_action_set

        return OracleAgent(make_action_set(action_set, screen_size=screen_size))

    return make


def _to_device(model: nn.Module, device: str) -> None:
    """``model.to(device)``, called through ``nn.Module``'s signature: transformers wraps
    ``PreTrainedModel.to`` with ``functools.wraps``, which checkers read as an unbound function
    (at runtime the model's own ``to`` runs, as before)."""
    model.to(device)


def _hf_bundle(spec: AgentSpec) -> AgentBundle:
    """A transformers model as :class:`arpo_trainer.agent.PolicyAgent` (shared weights, one
    agent per desktop, generation serialized by a lock)."""
    from osworld_gym.actions import make_action_set

    if not spec.model:
        raise ValueError("--agent hf needs --model (a checkpoint directory, a hub id, or 'tiny')")
    torch = trainer_module("torch")
    PolicyAgent = trainer_module("arpo_trainer.agent").PolicyAgent
    TurnEncoder = trainer_module("arpo_trainer.chat").TurnEncoder
    generation = trainer_module("arpo_trainer.generation")
    TransformersPolicy = generation.TransformersPolicy
    turn_generation_config = generation.turn_generation_config
    torch.manual_seed(spec.seed)
    if spec.model == "tiny":
        from arpo_trainer.tiny import build_tiny_vlm

        vlm = build_tiny_vlm(seed=spec.seed)
        model, processor = vlm.model, vlm.processor
    else:
        from arpo_trainer.modeling import load_model, load_processor

        model = load_model(spec.model, dtype=spec.dtype)
        processor = load_processor(spec.model)
    _to_device(model, spec.device)
    aset_name = spec.action_set or "uitars"
    prompt = make_action_set(aset_name, screen_size=spec.screen_size).describe()
    encoder = TurnEncoder(processor, prompt, max_history_images=spec.history_images)
    aset_kwargs: dict[str, Any] = {}
    if aset_name == "uitars":  # coordinates live in the frame of the screenshot the model sees
        aset_kwargs = {
            "max_pixels": encoder.max_pixels,
            "min_pixels": encoder.min_pixels,
            "factor": encoder.factor,
        }
    gen = turn_generation_config(
        encoder,
        max_new_tokens=spec.max_tokens,
        temperature=spec.temperature,
        top_p=spec.top_p,
        do_sample=spec.temperature > 0,
    )
    constraint = None
    if spec.action_grammar:
        if aset_name != "uitars":
            raise ValueError(f"--action-grammar needs the uitars action set, got {aset_name!r}")
        aset = make_action_set(aset_name, screen_size=spec.screen_size, **aset_kwargs)
        frame = getattr(aset, "frame")  # noqa: B009 (UITarsActionSet only)
        constraint = generation.action_constraint(encoder, tuple(frame), spec.max_tokens)
    policy = LockedPolicy(TransformersPolicy(model, encoder, gen, constraint))

    def make() -> Any:
        return PolicyAgent(policy, encoder)

    name = spec.name or _model_name(spec.model)
    return AgentBundle(
        make,
        aset_name,
        aset_kwargs,
        name,
        {
            "agent": "hf",
            "model": spec.model,
            "temperature": spec.temperature,
            "top_p": spec.top_p,
            "max_tokens": spec.max_tokens,
            "history_images": spec.history_images,
            "action_grammar": spec.action_grammar,
        },
    )


def _model_name(model: str) -> str:
    """A directory-safe ``<model>`` level from a path or hub id."""
    path = Path(model.rstrip("/"))
    name = path.name or "model"
    if name.startswith("checkpoint-") and path.parent.name:
        name = f"{path.parent.name}-{name}"
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
