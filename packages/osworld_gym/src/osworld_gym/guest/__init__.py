"""The guest server: runs *inside* a desktop sandbox and exposes it over HTTP.

Start it with ``python -m osworld_gym.guest`` (see :mod:`osworld_gym.guest.__main__`); talk to it
with :class:`osworld_gym.client.GuestClient`. It speaks OSWorld's guest protocol (``/screenshot``,
``/execute``, ``/setup/*``, ...) plus osworld-gym's extensions under ``/osworld_gym/`` (typed
XTest actions, raw screenshots, fast desktop reset, health).

Modules, one concept each: :mod:`~.server` (HTTP, auth, JSON errors), :mod:`~.osworld_api` and
:mod:`~.extension_api` (endpoints), :mod:`~.app` (configuration and wiring, reset, health),
:mod:`~.desktop` (Xvfb, window manager, session bus), :mod:`~.processes` (spawning, reaping,
killing), :mod:`~.screen` (capture), :mod:`~.xinput` (XTest input), :mod:`~.windows` (wmctrl),
:mod:`~.homedir` (home template, temp dir), :mod:`~.recording` (ffmpeg), :mod:`~.a11y` and
:mod:`~.a11y_helper` (AT-SPI tree), :mod:`~.multipart` (form parsing).

Nothing here imports heavy packages: only the standard library, python-xlib, mss, Pillow.
"""
