"""report.html as a person sees it: opened in headless Chromium (Debian's ``chromium``), with its
JavaScript run, and read back from the rendered DOM. Plus the plots behind it."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from arpo_eval.agents import AgentSpec
from arpo_eval.plots import curves, find_trainer_state, training_curves
from arpo_eval.report import write_report
from arpo_eval.run import RunConfig, run
from lxml import html as lxml_html

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def rendered_dom(page, fragment: str = ""):
    """The DOM of ``page`` after Chromium loaded it (images included) and ran its scripts."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (scripts/install.sh installs it)")
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--allow-file-access-from-files",
        "--virtual-time-budget=5000",
        "--dump-dom",
        page.resolve().as_uri() + fragment,
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
    return lxml_html.fromstring(out)


def text(node) -> str:
    return " ".join(node.text_content().split())


def trainer_log(tmp_path):
    """What TRL's trainer leaves in its output dir: checkpoint-*/trainer_state.json."""
    ckpt = tmp_path / "train" / "checkpoint-4"
    ckpt.mkdir(parents=True)
    history = [
        {
            "step": s,
            "loss": 1.0 / s,
            "reward": 0.1 * s,
            "reward_std": 0.2,
            "episode/success_rate": 0.05 * s,
        }
        for s in range(1, 5)
    ]
    (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": 4, "log_history": history}))
    return tmp_path / "train"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    run(
        RunConfig(
            agent=AgentSpec("fail"),
            tasks="builtin:os",
            out=str(tmp / "run"),
            provider="fake",
            settle_max_s=0,
            trials=2,
            num_envs=2,
            progress=False,
        )
    )
    return write_report(tmp / "run", train_log=trainer_log(tmp))


def test_the_domain_table_shows_the_runs_numbers(report):
    dom = rendered_dom(report)
    assert dom.xpath("//body/@data-ready") == ["1"]  # the script ran
    rows = {
        r.get("data-group"): r for r in dom.xpath("//table[@id='domain-table']//tr[@data-group]")
    }
    os_row = rows["os"]
    cell = {c.get("class").split()[1]: text(c) for c in os_row.xpath("td[contains(@class,'num')]")}
    assert cell == {
        "tasks": "18",
        "scored": "18",
        "mean": "11.1%",
        "pass": "11.1%",
        "solved": "2",
        "infra": "0",
        "not-run": "0",
    }
    assert [text(c) for c in rows["infeasible"].xpath("td")][:5] == [
        "infeasible",
        "2",
        "2",
        "100.0%",
        "100.0%",
    ]
    assert dom.xpath("//th[text()='mean@2']") and dom.xpath("//th[text()='pass@2']")
    plots = dom.xpath("//div[@class='plots']/img/@alt")
    assert plots == ["success per domain", "training curves"]
    assert text(dom.get_element_by_id("shown-count")) == "18 of 18 tasks shown"


def test_expanding_a_row_shows_its_screenshots_thoughts_and_actions(report):
    dom = rendered_dom(report, "#task=os-infeasible-001")
    row = dom.xpath("//tr[@class='task open'][@data-task='os-infeasible-001']")
    assert row and text(row[0].xpath("td[@class='status status-pass']")[0]) == "pass"
    detail = dom.xpath("//tr[@data-for='os-infeasible-001']")[0]
    assert "hidden" not in detail.get("class")
    trials = detail.xpath(".//div[@class='trial']")
    assert [text(t.xpath("h4")[0]) for t in trials] == [
        "trial 0: score 1, 1 steps",
        "trial 1: score 1, 1 steps",
    ]
    imgs = detail.xpath(".//img")
    assert len(imgs) == 4  # per trial: the screen before step 1, and the final screen
    assert all(i.get("data-loaded") == "1" for i in imgs), [i.get("src") for i in imgs]
    assert "Action: FAIL" in text(detail)
    # rows that were not asked for stay closed
    assert "hidden" in dom.xpath("//tr[@data-for='os-copy-001']")[0].get("class")


def test_filters_hide_the_other_rows(report):
    dom = rendered_dom(report, "#status=pass")
    visible = [
        r.get("data-task")
        for r in dom.xpath("//tr[contains(@class,'task')]")
        if "hidden" not in r.get("class")
    ]
    assert visible == ["os-infeasible-001", "os-infeasible-002"]
    assert text(dom.get_element_by_id("shown-count")) == "2 of 18 tasks shown"
    dom = rendered_dom(report, "#domain=os&status=fail")
    assert text(dom.get_element_by_id("shown-count")) == "16 of 18 tasks shown"


def test_embedded_report_is_one_movable_file(report, tmp_path):
    moved = write_report(report.parent, output=tmp_path / "elsewhere" / "r.html", embed_images=True)
    dom = rendered_dom(moved, "#task=os-copy-001")
    imgs = dom.xpath("//tr[@data-for='os-copy-001']//img")
    assert imgs and all(i.get("src").startswith("data:image/jpeg;base64,") for i in imgs)
    assert all(i.get("data-loaded") == "1" for i in imgs)


def test_training_curves_read_the_trainers_log_history(tmp_path):
    log_dir = trainer_log(tmp_path)
    state = find_trainer_state(log_dir)
    assert state.parent.name == "checkpoint-4"
    data = curves(json.loads(state.read_text())["log_history"])
    assert sorted(data) == ["episode/success_rate", "reward", "reward_std"]
    assert training_curves(log_dir).startswith(b"\x89PNG")
    with pytest.raises(FileNotFoundError, match="trainer_state.json"):
        find_trainer_state(tmp_path / "nothing")
