"""How an :class:`~arpo_trainer.config.ARPOConfig` becomes a prompt, an action set and desktops.

Shared by training, task selection and evaluation, so all three see the same episodes.
"""

from __future__ import annotations

from typing import Any

from osworld_gym.actions import ActionSet, make_action_set
from osworld_gym.settle import SettleConfig

from arpo_trainer.chat import TurnEncoder
from arpo_trainer.config import ARPOConfig


def prompt_template(args: ARPOConfig) -> str:
    """``args.prompt_template``, or the action set's own prompt (UI-TARS: with an ``{instruction}``
    slot)."""
    if args.prompt_template:
        return args.prompt_template
    return make_action_set(args.action_set, screen_size=args.screen_size).describe()


def make_encoder(args: ARPOConfig, processor: Any) -> TurnEncoder:
    """The turn encoder for ``processor`` with the config's prompt, image cap and pixel budget."""
    return TurnEncoder(
        processor,
        prompt_template(args),
        system_prompt=args.system_prompt,
        max_history_images=args.max_history_images,
        image_max_pixels=args.image_max_pixels,
        feature_cache_bytes=args.feature_cache_mb * 1024**2,
    )


def action_set_kwargs(args: ARPOConfig, encoder: TurnEncoder) -> dict[str, Any]:
    """Action set arguments; UI-TARS coordinates default to the frame of the screenshot the model
    sees."""
    kwargs = args.action_set_options
    if args.action_set == "uitars":
        kwargs.setdefault("max_pixels", encoder.max_pixels)
        kwargs.setdefault("min_pixels", encoder.min_pixels)
        kwargs.setdefault("factor", encoder.factor)
    return kwargs


def make_policy_action_set(args: ARPOConfig, encoder: TurnEncoder) -> ActionSet:
    """The action set the policy writes (used to spot format errors before the desktop)."""
    return make_action_set(
        args.action_set, screen_size=args.screen_size, **action_set_kwargs(args, encoder)
    )


def env_kwargs(args: ARPOConfig, encoder: TurnEncoder) -> dict[str, Any]:
    """Keyword arguments of ``gym.make("OSWorld-v0", ...)`` for every desktop."""
    settle = SettleConfig(max_s=args.settle_max_s) if args.settle else None
    kwargs: dict[str, Any] = {
        "provider": args.provider,
        "action_set": args.action_set,
        "action_set_kwargs": action_set_kwargs(args, encoder),
        "screen_size": args.screen_size,
        "max_steps": args.max_turns,
        "settle": settle,
    }
    kwargs.update(args.env_options)
    return kwargs
