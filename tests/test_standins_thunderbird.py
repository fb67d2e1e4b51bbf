"""The stand-in Thunderbird profile and firefox_decrypt.py (tests/standins.py) that official
Thunderbird tasks unpack and evaluate: the account lister reports the accounts the chosen
profile's prefs.js configures, so removing one changes what check_csv sees."""

from __future__ import annotations

import io
import re
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path

from osworld_gym.evaluators.metrics.files import check_csv
from osworld_gym.evaluators.metrics.misc_checks import run_sqlite3

from standins import FIREFOX_DECRYPT, TB_ACCOUNT, TB_PROFILE, _tb_profile

#: dfac9ee8's rule: the account it asks to remove must not be listed.
UNEXPECT = {"unexpect": [{"url": "imap://outlook.office365.com",
                          "user": "anonym-x2024@outlook.com"}]}
#: dfac9ee8's command line (its evaluator runs ``-n -c 2 -f csv -d ,`` on ``~/.thunderbird``)
ARGS = ["-n", "-c", "2", "-f", "csv", "-d", ","]
#: dd84e895's rule ("star every message in the inbox"), on Gloda's index
STARRED = {"sql": "SELECT COALESCE((SELECT COUNT(*) FROM messageAttributes WHERE attributeID = 58"
           " AND value = 1 AND messageID IN (SELECT id FROM messages WHERE folderID = 13)), 0)"
           " = (SELECT COUNT(*) FROM messages WHERE folderID = 13);"}


def _unpack(home: Path) -> Path:
    with tarfile.open(fileobj=io.BytesIO(_tb_profile("seed")), mode="r:gz") as t:
        t.extractall(home, filter="data")
    script = home / "firefox_decrypt.py"
    script.write_text(FIREFOX_DECRYPT)
    return script


def _accounts(home: Path, script: Path, *args: str) -> Path:
    out = subprocess.run([sys.executable, str(script), str(home / ".thunderbird"), *args],
                         capture_output=True, text=True, check=True, timeout=60).stdout
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
    fail = subprocess.run([sys.executable, str(script), str(tmp_path / ".thunderbird"), "-n",
                           "-c", "1", "-f", "csv"], capture_output=True, text=True, timeout=60)
    assert fail.returncode != 0
    bad = subprocess.run([sys.executable, str(script), str(tmp_path / ".thunderbird"), "-n",
                          "-c", "3"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "no profile number 3" in bad.stderr


def test_the_inbox_index_is_not_all_starred_until_every_message_is(tmp_path):
    _unpack(tmp_path)
    db = tmp_path / ".thunderbird" / TB_PROFILE / "global-messages-db.sqlite"
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA user_version").fetchone() == (30,)  # Gloda keeps it
    assert run_sqlite3(str(db), STARRED) == 0.0  # doing nothing: one of three starred
    with sqlite3.connect(db) as con:  # what Gloda records when the rest are starred
        con.execute("INSERT INTO messageAttributes SELECT conversationID, id, 58, 1 "
                    "FROM messages WHERE folderID = 13 AND id != 1")
    assert run_sqlite3(str(db), STARRED) == 1.0
