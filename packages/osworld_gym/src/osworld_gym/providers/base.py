"""The provider protocol: where a desktop runs and how to reach it.

A provider owns one desktop. ``start()`` brings it up and returns a
:class:`~osworld_gym.protocol.DesktopClient` connected to it; ``reset_state()`` returns it to a
clean state between episodes
as fast as the backend allows; ``stop()`` releases everything it started. Providers never parse
actions or score tasks: that is the env's job, identical for every backend.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any

from osworld_gym.providers.capabilities import OSWORLD_IMAGE, Capabilities

if TYPE_CHECKING:
    from osworld_gym.protocol.client import DesktopClient


class Provider(abc.ABC):
    """One desktop behind the guest protocol."""

    #: short name used in logs and ``info`` (``"local"``, ``"docker"``, ``"remote"``, ``"fake"``)
    name: str = "provider"
    #: the password ``{CLIENT_PASSWORD}`` expands to in task commands
    client_password: str = "password"
    #: Whether the agent's processes are separated from the judge's (README "Threat model"):
    #: ``False`` where the agent could forge its score, ``None`` where the provider cannot tell.
    separated: bool | None = None
    #: the desktop profile (``"ubuntu"``, ``"openbox"``) where the provider has them
    profile: str | None = None

    def __init__(self, screen_size: tuple[int, int] = (1920, 1080)):
        self.screen_size = screen_size

    @classmethod
    def capabilities(cls, profile: str | None = None) -> Capabilities:
        """What this provider's desktops offer tasks in its default configuration (with desktop
        ``profile``, where it has them): read by task classification. Here (guests reached by
        URL or VNC): OSWorld's own VM image, which is what such a guest is taken to be."""
        return OSWORLD_IMAGE

    @classmethod
    def config_capabilities(
        cls, provider_kwargs: dict[str, Any] | None = None, profile: str | None = None
    ) -> Capabilities:
        """What desktops made with ``provider_kwargs`` (the keyword arguments of the provider)
        offer tasks, without starting one: what ``osworld-gym tasks coverage`` and the trainer's
        dry run count. Default: :meth:`capabilities` with the ``profile`` argument."""
        kwargs = provider_kwargs or {}
        return cls.capabilities(kwargs.get("profile") or profile)

    def desktop_capabilities(self) -> Capabilities:
        """What this provider's desktop offers tasks (its own configuration)."""
        return type(self).capabilities(self.profile)

    @abc.abstractmethod
    def start(self) -> DesktopClient:
        """Bring the desktop up (idempotent) and return a ready client."""

    @abc.abstractmethod
    def reset_state(self) -> None:
        """Kill task applications and restore a clean home; keep the desktop itself running."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Release everything this provider started. Safe to call twice."""

    def restart(self) -> DesktopClient:
        """Tear the desktop down and start a fresh one (recovery after an infrastructure error)."""
        self.stop()
        return self.start()

    @property
    @abc.abstractmethod
    def running(self) -> bool:
        """Whether the desktop is up as far as the provider can tell."""

    def __enter__(self) -> Provider:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
