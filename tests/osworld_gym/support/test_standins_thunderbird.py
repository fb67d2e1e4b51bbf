"""The stand-in Thunderbird profile and firefox_decrypt.py (tests/standins.py) that official
Thunderbird tasks unpack and evaluate: the account lister reports the accounts the chosen
profile's prefs.js configures, so removing one changes what check_csv sees."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from osworld_gym.evaluators.metrics.files import check_csv
from osworld_gym.evaluators.metrics.misc_checks import run_sqlite3
from standins import FIREFOX_DECRYPT, TB_ACCOUNT, TB_PROFILE, _tb_profile

#: dfac9ee8's rule: the account it asks to remove must not be listed.
UNEXPECT = {
    "unexpect": [{"url": "imap://outlook.office365.com", "user": "anonym-x2024@outlook.com"}]
}
#: dfac9ee8's command line (its evaluator runs ``-n -c 2 -f csv -d ,`` on ``~/.thunderbird``)
ARGS = ["-n", "-c", "2", "-f", "csv", "-d", ","]
#: dd84e895's rule ("star every message in the inbox"), on Gloda's index
STARRED = {
    "sql": "SELECT COALESCE((SELECT COUNT(*) FROM messageAttributes WHERE attributeID = 58"
    " AND value = 1 AND messageID IN (SELECT id FROM messages WHERE folderID = 13)), 0)"
    " = (SELECT COUNT(*) FROM messages WHERE folderID = 13);"
}


def _unpack(home: Path) -> Path:
    with tarfile.open(fileobj=io.BytesIO(_tb_profile("seed")), mode="r:gz") as t:
        t.extractall(home, filter="data")
    script = home / "firefox_decrypt.py"
    script.write_text(FIREFOX_DECRYPT)
    return script


def _accounts(home: Path, script: Path, *args: str) -> Path:
    out = subprocess.run(
        [sys.executable, str(script), str(home / ".thunderbird"), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    csv = home / "accounts.csv"
    csv.write_text(out)
    return csv


def test_profile_holds_the_account_and_the_lister_reports_it(tmp_path):
    script = _unpack(tmp_path)
    csv = _accounts(tmp_path, script, *ARGS)
    kind, host, user = TB_ACCOUNT
    assert csv.read_text().splitlines() == ["url,user,password", f"{kind}://{host},{user},"]
    assert check_csv(str(csv), UNEXPECT) == 0.0  # doing nothing leaves the account: 0


def test_removing_the_account_from_prefs_removes_it_from_the_list(tmp_path):
    script = _unpack(tmp_path)
    prefs = tmp_path / ".thunderbird" / TB_PROFILE / "prefs.js"
    # what Thunderbird's account manager writes after removing account1: the account list
    # without it and its account/server branches cleared
    text = prefs.read_text().replace('"account1,account2"', '"account2"')
    text = re.sub(r'user_pref\("mail\.(account\.account1|server\.server1)\..*\n', "", text)
    prefs.write_text(text)
    csv = _accounts(tmp_path, script, *ARGS)
    assert csv.read_text().splitlines() == ["url,user,password"]
    assert check_csv(str(csv), UNEXPECT) == 1.0


def test_the_lister_reads_the_profile_chosen_by_number(tmp_path):
    script = _unpack(tmp_path)
    # profile 1 is an empty one: no prefs.js, the lister fails like the real one would
    fail = subprocess.run(
        [sys.executable, str(script), str(tmp_path / ".thunderbird"), "-n", "-c", "1", "-f", "csv"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert fail.returncode != 0
    bad = subprocess.run(
        [sys.executable, str(script), str(tmp_path / ".thunderbird"), "-n", "-c", "3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode != 0 and "no profile number 3" in bad.stderr


def test_the_inbox_index_is_not_all_starred_until_every_message_is(tmp_path):
    _unpack(tmp_path)
    db = tmp_path / ".thunderbird" / TB_PROFILE / "global-messages-db.sqlite"
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA user_version").fetchone() == (30,)  # Gloda keeps it
    assert run_sqlite3(str(db), STARRED) == 0.0  # doing nothing: one of three starred
    with sqlite3.connect(db) as con:  # what Gloda records when the rest are starred
        con.execute(
            "INSERT INTO messageAttributes SELECT conversationID, id, 58, 1 "
            "FROM messages WHERE folderID = 13 AND id != 1"
        )
    assert run_sqlite3(str(db), STARRED) == 1.0


class _Marionette:
    """Just enough of Marionette's protocol (``length:json`` frames) to run chrome-privileged
    JavaScript in a headless Thunderbird."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.buf, self.serial = b"", 0
        self._recv()  # the server's hello
        self.call("WebDriver:NewSession", {"capabilities": {}})
        self.call("Marionette:SetContext", {"value": "chrome"})

    def _recv(self) -> object:
        while b":" not in self.buf:
            self.buf += self.sock.recv(65536)
        size, rest = self.buf.split(b":", 1)
        while len(rest) < int(size):
            rest += self.sock.recv(65536)
        self.buf = rest[int(size) :]
        return json.loads(rest[: int(size)])

    def call(self, command: str, params: dict) -> object:
        self.serial += 1
        data = json.dumps([0, self.serial, command, params]).encode()
        self.sock.sendall(str(len(data)).encode() + b":" + data)
        _, _, error, result = self._recv()
        assert error is None, error
        return result["value"] if isinstance(result, dict) and "value" in result else result


_ACCOUNTS = """const {MailServices} = ChromeUtils.importESModule(
  "resource:///modules/MailServices.sys.mjs");"""


@pytest.mark.skipif(
    shutil.which("thunderbird") is None, reason="needs Thunderbird (scripts/install.sh)"
)
def test_thunderbird_uses_the_profile_and_removing_the_account_empties_the_list(tmp_path):
    """Thunderbird itself (headless, driven over Marionette) loads the stand-in profile with
    its account, and its own account removal rewrites prefs.js so the lister reports none."""
    script = _unpack(tmp_path)
    profile = tmp_path / ".thunderbird" / TB_PROFILE
    with open(profile / "prefs.js", "a") as f:
        f.write('user_pref("marionette.port", 0);\n')  # a free port, written to the profile
    env = {**os.environ, "HOME": str(tmp_path), "MOZ_HEADLESS": "1"}
    tb = subprocess.Popen(
        ["thunderbird", "--headless", "--marionette", "-remote-allow-system-access"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = profile / "MarionetteActivePort"
        deadline = time.monotonic() + 120
        while not port_file.is_file() or not port_file.read_text().strip():
            assert tb.poll() is None and time.monotonic() < deadline, "no Marionette port"
            time.sleep(0.5)
        m = _Marionette(int(port_file.read_text()))
        users = m.call(
            "WebDriver:ExecuteScript",
            {
                "args": [],
                "script": _ACCOUNTS
                + """
            return MailServices.accounts.accounts.map(a => a.incomingServer.username);""",
            },
        )
        assert TB_ACCOUNT[2] in users  # Thunderbird runs the stand-in profile, not a new one
        m.call(
            "WebDriver:ExecuteScript",
            {
                "args": [TB_ACCOUNT[2]],
                "script": _ACCOUNTS
                + """
            const gone = MailServices.accounts.accounts.find(
              a => a.incomingServer.username == arguments[0]);
            MailServices.accounts.removeAccount(gone, true);
            Services.prefs.savePrefFile(null);""",
            },
        )
        deadline = time.monotonic() + 30
        while TB_ACCOUNT[2] in (csv := _accounts(tmp_path, script, *ARGS)).read_text():
            assert time.monotonic() < deadline, "prefs.js still names the removed account"
            time.sleep(0.5)
        assert check_csv(str(csv), UNEXPECT) == 1.0
    finally:
        tb.terminate()
        try:
            tb.wait(timeout=30)
        except subprocess.TimeoutExpired:
            tb.kill()
            tb.wait()
