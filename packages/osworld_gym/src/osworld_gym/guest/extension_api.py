"""osworld-gym's own endpoints under ``/osworld_gym/``: typed actions, fast screenshots, reset,
health."""

from __future__ import annotations

import json
import time

from osworld_gym.errors import ActionError
from osworld_gym.guest.app import GuestApp
from osworld_gym.guest.homedir import HomeError
from osworld_gym.guest.screen import encode_png, encode_raw
from osworld_gym.guest.server import HTTPError, Request, Response, Router, json_response
from osworld_gym.guest.settle_signal import Pacer
from osworld_gym.protocol import routes
from osworld_gym.protocol.input import PACE_BUDGET_S, PACE_MAX_S
from osworld_gym.protocol.primitives import Wait, from_dict

#: Most primitives accepted in one request.
MAX_ACTIONS = 256
#: Longest settle wait a screenshot request may ask for, in seconds.
MAX_SETTLE_S = 30.0
#: Longest a settled screenshot waits for dying processes to be reaped (a core dump can be slow;
#: past this the crash is reported with a later frame, or by the health check before scoring).
REAP_BEFORE_OBSERVING_S = 2.0


def register(router: Router, app: GuestApp) -> None:
    """Add the extension endpoints to ``router``."""

    def actions(req: Request) -> Response:
        body = req.json()
        raw = body.get("actions")
        if not isinstance(raw, list):
            raise HTTPError(400, 'body must be {"actions": [primitive, ...]}')
        more = body.get("more_input", False)
        if not isinstance(more, bool):
            raise HTTPError(400, f"more_input must be true or false, got {more!r}")
        if len(raw) > MAX_ACTIONS:
            raise HTTPError(400, f"at most {MAX_ACTIONS} actions per request, got {len(raw)}")
        prims = []
        for i, d in enumerate(raw):  # validate everything before executing anything
            try:
                p = from_dict(d)
            except ActionError as e:
                raise HTTPError(400, f"action {i}: {e}") from None
            if isinstance(p, Wait):
                raise HTTPError(
                    400,
                    f"action {i}: wait is executed by the host, not the guest; "
                    "send the actions around it in separate requests",
                )
            prims.append(p)
        t0 = time.perf_counter()
        app.forget_task_steps()
        if app.settle is not None:
            app.settle.mark_input()  # what the screen does from here on is these actions' doing
        # pyautogui pauses after each call; here until the desktop has reacted to it (also after
        # the last one when more of the same action follows a host-side wait)
        pacer = Pacer(app.settle, PACE_MAX_S, PACE_BUDGET_S)
        app.xinput.run(prims, pacer, pace_last=more)
        exec_ms = (time.perf_counter() - t0) * 1000
        pace_ms = 1000 * pacer.spent_s
        return json_response(
            {
                "status": "success",
                "executed": len(prims),
                "timings": {
                    "exec_ms": round(exec_ms, 2),
                    "pace_ms": round(pace_ms, 2),
                    "paces": pacer.count,
                },
                "crashes": app.registry.crash_count,
            }
        )

    def screenshot(req: Request) -> Response:
        fmt = req.query.get("format", "png")
        if fmt not in ("png", "raw"):
            raise HTTPError(400, f"format must be png or raw, got {fmt!r}")
        cursor = req.query.get("cursor", "1") not in ("0", "false", "no")
        settled = {}
        if "settle" in req.query:
            settled = _settle(req.query["settle"])
        frame = app.screen.capture(cursor=cursor)
        t0 = time.perf_counter()
        if fmt == "raw":
            body, ctype = encode_raw(frame.image), "application/octet-stream"
        else:
            body, ctype = encode_png(frame.image), "image/png"
        encode_ms = (time.perf_counter() - t0) * 1000
        w, h = frame.image.size
        return Response(
            200,
            body,
            ctype,
            {
                routes.WIDTH_HEADER: str(w),
                routes.HEIGHT_HEADER: str(h),
                routes.CAPTURE_MS_HEADER: f"{frame.capture_ms:.2f}",
                routes.ENCODE_MS_HEADER: f"{encode_ms:.2f}",
                routes.CRASHES_HEADER: str(app.registry.crash_count),
                **settled,
            },
        )

    def _settle(value: str) -> dict[str, str]:
        """Wait (at most ``value`` seconds after the last input) until the desktop is idle;
        the facts as a JSON ``X-Settle`` header, what kept the wait going as ``X-Settle-Why``.
        501 where the X server has no DAMAGE."""
        try:
            max_s = float(value)
        except ValueError:
            raise HTTPError(400, f"settle must be a number of seconds, got {value!r}") from None
        if not 0 <= max_s <= MAX_SETTLE_S:
            raise HTTPError(
                400, f"settle must be between 0 and {MAX_SETTLE_S} seconds, got {max_s}"
            )
        if app.settle is None:
            raise HTTPError(
                501,
                "this desktop's X server has no DAMAGE extension: poll "
                "screenshots to see the screen settle",
            )
        facts = app.settle.wait(max_s)
        # An app killed before (or during) this turn is this observation's news: a task app
        # below a launcher (``oosplash``) dies, then its launcher exits, each taking a while
        # under load, and a turn now often ends sooner than that. Wait for what is dying to be
        # reaped so the crash count sent with this frame includes it.
        t0 = time.perf_counter()
        app.registry.reap_dying(timeout=REAP_BEFORE_OBSERVING_S)
        facts["reap_ms"] = (time.perf_counter() - t0) * 1000
        # what kept the wait going (the settle signal's trace, ASCII-safe for a header)
        why = app.settle.last_why.encode("ascii", "replace").decode()[:2000]
        return {
            routes.SETTLE_HEADER: json.dumps({k: round(v, 2) for k, v in facts.items()}),
            routes.SETTLE_WHY_HEADER: why,
        }

    def reset(req: Request) -> Response:
        body = req.json()
        restore = body.get("restore_home", True)
        if not isinstance(restore, bool):
            raise HTTPError(400, f"restore_home must be true or false, got {restore!r}")
        try:
            return json_response(app.reset(restore_home=restore))
        except HomeError as e:
            raise HTTPError(409, str(e)) from None

    def health(req: Request) -> Response:
        return json_response(app.health())

    router.add("POST", routes.ACTIONS, actions)
    router.add("GET", routes.RAW_SCREENSHOT, screenshot)
    router.add("POST", routes.RESET, reset)
    router.add("GET", routes.HEALTH, health)
