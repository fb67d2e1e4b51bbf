"""Getters: read a piece of state (a file, a command's output, a rule) for a metric.

Each is ``get_<type>(ctx: EvalContext, config: dict) -> value`` where ``type`` is the task JSON
``result``/``expected`` ``type``. Modules mirror OSWorld's: :mod:`.file`, :mod:`.general`,
:mod:`.misc`, :mod:`.info` (incl. ``accessibility_tree``), :mod:`.relative_time`
(``rule_relativeTime``), :mod:`.chrome` (tabs through DevTools, queried inside the desktop by
:mod:`.cdp_probe`), :mod:`.chrome_profile` (Chrome's profile files), :mod:`.vlc`, :mod:`.apps`
(GIMP's config,
the default video player, the screen size), :mod:`.slides` (media inside a presentation).
They are imported lazily through :mod:`osworld_gym.tasks.evaluator_registry`.

Conventions (shared with :func:`osworld_gym.evaluators.evaluate`):

* state the agent may have destroyed (a file it deleted) is returned as ``None``; the metric then
  scores 0;
* gold data that cannot be obtained raises (``FileNotFoundError``, ``SetupError``), and so does a
  broken desktop (``GuestError``): the evaluation is then an infrastructure error, not a 0.
"""
