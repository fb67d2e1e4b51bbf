"""data_delete_automacally against Preferences shaped like a fresh Chromium profile's: the
profile already has default_content_setting_values (other settings), so only the cookies
setting "session only" (4, what Chrome's "delete data on close" toggle writes) may answer
"true" (OSWorld answers "true" for the key's mere presence; see the getter)."""

from __future__ import annotations

import json

from osworld_gym.evaluators import EvalContext, getter

PREFS = "/home/user/.config/google-chrome/Default/Preferences"


class Desk:
    def __init__(self, prefs: dict | None):
        self.prefs = prefs

    def get_file(self, path: str, max_bytes: int | None = None) -> bytes | None:
        assert path == PREFS
        return None if self.prefs is None else json.dumps(self.prefs).encode()


def answer(tmp_path, prefs: dict | None) -> str | None:
    return getter("data_delete_automacally")(
        EvalContext(client=Desk(prefs), cache_dir=tmp_path, task_id="t"), {}
    )


def test_only_session_only_cookies_mean_delete_on_close(tmp_path):
    fresh = {"profile": {"default_content_setting_values": {"notifications": 2}}}
    assert answer(tmp_path, fresh) == "false"  # OSWorld's rule would say "true" here
    assert (
        answer(tmp_path, {"profile": {"default_content_setting_values": {"cookies": 4}}}) == "true"
    )
    assert (
        answer(tmp_path, {"profile": {"default_content_setting_values": {"cookies": 1}}}) == "false"
    )
    assert answer(tmp_path, {"profile": {}}) == "false"
    assert answer(tmp_path, {"profile": {"default_content_setting_values": "junk"}}) == "false"
    assert answer(tmp_path, None) is None  # Chrome never ran: the metric scores 0
