"""Getters for the browser's live state, through Chrome DevTools (CDP) *inside the desktop*.

OSWorld connects Playwright from the host to ``<vm_ip>:9222``. Our desktops are
network-isolated and reachable only through the guest server, so these getters run
:mod:`.cdp_probe` (standard library only) in the guest with ``python3 -c`` via
``ctx.client.execute`` and parse its JSON answer. DevTools must be listening: OSWorld's tasks
start Chrome with ``--remote-debugging-port=1337`` (and ``socat`` 9222 -> 1337), and our
``google-chrome`` shim adds port 1337 when a command line names none. Ports tried, in order:
``config["ports"]``, else ``ctx.extra["chromium_ports"]``, else ``[1337, 9222]``.

When no browser answers (the agent closed it), the getters return ``None`` and the metric
scores 0, as in OSWorld. A guest that cannot run the probe raises
:class:`~osworld_gym.errors.EvaluatorError`.

Differences from OSWorld, by design: ``active_tab_info`` reads the tab as it is (title, URL,
``document.body.innerText``) instead of re-opening its URL in a new tab;
``active_url_from_accessTree`` takes the URL from DevTools rather than from the address bar's
accessibility node, then renders it as OSWorld would read it (see :func:`address_bar_url`).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from osworld_gym.errors import EvaluatorError
from osworld_gym.evaluators.context import EvalContext
from osworld_gym.evaluators.getters import cdp_probe

logger = logging.getLogger(__name__)

DEFAULT_PORTS = (1337, 9222)
#: Seconds the probe may take in the guest (each DevTools request has its own shorter timeout).
PROBE_TIMEOUT_S = 30.0


def _ports(ctx: EvalContext, config: dict[str, Any]) -> list[int]:
    ports = config.get("ports") or ctx.extra.get("chromium_ports") or DEFAULT_PORTS
    return [int(p) for p in ports]


def probe(ctx: EvalContext, args: dict[str, Any]) -> dict[str, Any]:
    """Run :mod:`.cdp_probe` in the guest with ``args``; its JSON answer.

    Raises:
        EvaluatorError: the guest could not run the probe or its output is not JSON.
    """
    source = Path(cdp_probe.__file__).read_text(encoding="utf-8")
    command = ["python3", "-c", source, json.dumps(args)]
    answer = ctx.client.execute(command, shell=False, timeout=PROBE_TIMEOUT_S)
    if answer.get("status", "success") != "success" or answer.get("returncode", 0) != 0:
        raise EvaluatorError(
            "the desktop could not run the DevTools probe (is python3 installed there?): "
            f"{answer.get('message') or answer.get('error') or answer}"
        )
    try:
        out = json.loads(answer.get("output") or "")
    except json.JSONDecodeError as exc:
        raise EvaluatorError(
            f"the DevTools probe printed non-JSON: {answer.get('output')!r:.300}"
        ) from exc
    if not isinstance(out, dict):
        raise EvaluatorError(f"the DevTools probe printed {out!r:.300}, not an object")
    return out


def _answer(
    ctx: EvalContext, config: dict[str, Any], args: dict[str, Any]
) -> dict[str, Any] | None:
    out = probe(ctx, {**args, "ports": _ports(ctx, config)})
    if "error" in out:
        logger.info("task %s: no browser state: %s", ctx.task_id, out["error"])
        return None
    return out


def get_active_tab_info(ctx: EvalContext, config: dict[str, Any]) -> dict[str, Any] | None:
    """The active tab as ``{"title", "url", "content"}`` (content: the page's visible text).

    ``None`` when no browser answers or it has no tab.
    """
    out = _answer(ctx, config, {"action": "active", "content": True})
    tab = out.get("tab") if out else None
    if not tab:
        return None
    return {
        "title": tab.get("title", ""),
        "url": tab.get("url", ""),
        "content": tab.get("content") or "",
    }


def get_open_tabs_info(ctx: EvalContext, config: dict[str, Any]) -> list[dict[str, str]] | None:
    """Every open tab as ``{"title", "url"}``, in the order the tabs were opened."""
    out = _answer(ctx, config, {"action": "list"})
    if out is None:
        return None
    return [{"title": t.get("title", ""), "url": t.get("url", "")} for t in out.get("tabs", [])]


def address_bar_url(url: str, goto_prefix: str = "https://") -> str:
    """``url`` as OSWorld reports it from the address bar: ``goto_prefix`` + the displayed text.

    Chrome displays http(s) addresses without the scheme and a leading ``www.``; OSWorld reads
    that text and prepends ``goto_prefix`` (default ``https://``). Other schemes are displayed
    whole.

    >>> address_bar_url("https://www.example.org/a?b=1")
    'https://example.org/a?b=1'
    >>> address_bar_url("http://example.org/", "https://www.")
    'https://www.example.org/'
    >>> address_bar_url("chrome://settings/privacy", "")
    'chrome://settings/privacy'
    """
    shown = url
    for scheme in ("https://", "http://"):
        if url.startswith(scheme):
            shown = url[len(scheme) :].removeprefix("www.")
            break
    return f"{goto_prefix}{shown}"


def get_active_url_from_accessTree(ctx: EvalContext, config: dict[str, Any]) -> str | None:  # noqa: N802
    """The active tab's URL, rendered as OSWorld's address-bar reading (:func:`address_bar_url`
    with ``config["goto_prefix"]``, default ``"https://"``); ``None`` without a browser."""
    out = _answer(ctx, config, {"action": "active"})
    tab = out.get("tab") if out else None
    if not tab or not tab.get("url"):
        return None
    return address_bar_url(tab["url"], config.get("goto_prefix", "https://"))
