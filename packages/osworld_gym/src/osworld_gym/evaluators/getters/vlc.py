"""Getters for VLC: its configuration file and its HTTP interface's status.

OSWorld's image runs VLC with the HTTP interface on port 8080 (password ``password``, empty
user) and reads ``http://<vm>:8080/requests/status.xml`` from the host. Our desktops are reachable
only through the guest server, so the request is made *inside the desktop* by a one-line
``python3`` program run with ``ctx.client.execute``. Port and password: ``config["port"]`` /
``config["password"]``, else ``ctx.extra["vlc_port"]`` / ``ctx.extra["vlc_password"]``, else
8080 / ``"password"``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from osworld_gym.errors import EvaluatorError
from osworld_gym.evaluators.context import EvalContext
from osworld_gym.evaluators.getters.file import get_vm_file

logger = logging.getLogger(__name__)

VLCRC = "~/.config/vlc/vlcrc"
_TIMEOUT_S = 10.0

#: Runs in the guest: GET the status page with basic auth; prints {"status", "body"} or {"error"}.
_STATUS_PROGRAM = """
import base64, json, sys, urllib.error, urllib.request
args = json.loads(sys.argv[1])
auth = base64.b64encode((":" + args["password"]).encode()).decode()
request = urllib.request.Request(args["url"], headers={"Authorization": "Basic " + auth})
try:
    with urllib.request.urlopen(request, timeout=args["timeout"]) as resp:
        out = {"status": resp.status, "body": resp.read().decode("utf-8", "replace")}
except urllib.error.HTTPError as exc:
    out = {"status": exc.code, "body": ""}
except Exception as exc:
    out = {"error": type(exc).__name__ + ": " + str(exc)}
sys.stdout.write(json.dumps(out))
"""


def get_vlc_config(ctx: EvalContext, config: dict[str, Any]) -> str | None:
    """Copy VLC's ``~/.config/vlc/vlcrc`` into the cache as ``config["dest"]``; its local path,
    or ``None`` if VLC never wrote one."""
    return get_vm_file(ctx, {"path": VLCRC, "dest": config["dest"]})  # type: ignore[return-value]


def get_vlc_playing_info(ctx: EvalContext, config: dict[str, Any]) -> str | None:
    """Save VLC's ``/requests/status.xml`` into the cache as ``config["dest"]``; its local path.

    ``None`` when VLC does not answer or refuses (not running, HTTP interface off).

    Raises:
        EvaluatorError: the guest could not run the request program.
    """
    port = int(config.get("port", ctx.extra.get("vlc_port", 8080)))
    password = str(config.get("password", ctx.extra.get("vlc_password", "password")))
    args = {
        "url": f"http://127.0.0.1:{port}/requests/status.xml",
        "password": password,
        "timeout": _TIMEOUT_S,
    }
    answer = ctx.client.execute(
        ["python3", "-c", _STATUS_PROGRAM, json.dumps(args)], shell=False, timeout=_TIMEOUT_S + 20
    )
    try:
        out = json.loads(answer.get("output") or "")
    except json.JSONDecodeError:
        raise EvaluatorError(
            "the desktop could not query VLC: "
            f"{answer.get('error') or answer.get('message') or answer}"
        ) from None
    if "error" in out or out.get("status") != 200:
        why = out.get("error") or out.get("status")
        logger.info("task %s: VLC status unavailable: %s", ctx.task_id, why)
        return None
    local = ctx.cache_dir / config["dest"]
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_text(out["body"], encoding="utf-8")
    return str(local)
