"""The guest protocol: what host and guest agree on, and nothing else.

* :mod:`.primitives`: the typed actions every action set compiles to and the guest executes;
* :mod:`.keys`: key names and the X keysym behind each; :mod:`.input`: X button numbers,
  keysyms and the pacing of injected input (the guest's XTest and the VNC provider);
  :mod:`.events`: which input events a primitive becomes, with those pauses (both execute it);
* :mod:`.routes`: the guest server's routes and headers;
* :mod:`.client`: :class:`DesktopClient`, the interface every backend's client implements, and
  :func:`~.client.poll_until_ready`, the back-off of every client's ``wait_ready``.

Both sides import it: the guest server (inside the desktop) imports nothing else of osworld_gym
but errors, so this package imports only the standard library (python-xlib's keysym tables on
first use of :mod:`.input`).
"""

from osworld_gym.protocol.client import DesktopClient

__all__ = ["DesktopClient"]
