"""Metrics: small pure functions scoring a getter's value against the expected one.

Each is ``metric(result, [expected,] **options) -> float`` in ``[0, 1]`` with OSWorld's name and
keyword arguments, so task JSON works unchanged. A ``None`` result (the file the agent should
have produced does not exist) scores 0. Modules group metrics by the libraries they need and are
imported lazily through :mod:`..registry`: :mod:`.general` (standard library only),
:mod:`.text` (text files).
"""
