"""Where desktops run. See :mod:`osworld_gym.providers.base` for the protocol."""

from __future__ import annotations

import importlib
from typing import Any

from osworld_gym.providers.base import Provider

__all__ = ["Provider", "make_provider", "provider_class", "PROVIDERS"]

#: provider name -> "module:Class", imported on demand so unused backends cost nothing
PROVIDERS: dict[str, str] = {
    "local": "osworld_gym.providers.local:LocalProvider",
    "fake": "osworld_gym.providers.fake:FakeProvider",
    "docker": "osworld_gym.providers.docker:DockerProvider",
    "remote": "osworld_gym.providers.remote:RemoteProvider",
    "vnc": "osworld_gym.providers.vnc:VNCProvider",
}


def make_provider(
    spec: str | Provider, *, screen_size: tuple[int, int] = (1920, 1080), **kwargs: Any
) -> Provider:
    """Build a provider from its name (``"local"``, ``"fake"``) or return a given instance.

    >>> make_provider("fake", screen_size=(640, 480)).screen_size
    (640, 480)
    """
    if isinstance(spec, Provider):
        if kwargs:
            raise TypeError("provider_kwargs only apply when the provider is given by name")
        return spec
    if spec not in PROVIDERS:
        raise ValueError(
            f"unknown provider {spec!r}; choose one of {sorted(PROVIDERS)} "
            "or pass a Provider instance"
        )
    w, h = screen_size
    return provider_class(spec)(screen_size=(w, h), **kwargs)


def provider_class(name: str) -> type[Provider]:
    """The provider class registered as ``name`` (its module imported on first use).

    >>> provider_class("fake").capabilities().network
    False

    Raises:
        KeyError: no provider has that name.
    """
    module, cls = PROVIDERS[name].split(":")
    return getattr(importlib.import_module(module), cls)
