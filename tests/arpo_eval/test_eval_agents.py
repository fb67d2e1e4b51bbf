"""The model-backed agents end to end on the fake provider: a chat-completions endpoint (a small
HTTP server of ours speaking the OpenAI API with UI-TARS answers) and a tiny transformers model."""

from __future__ import annotations

import base64
import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from arpo_eval.agents import AgentError
from arpo_eval.cli import main
from arpo_eval.layout import read_run, read_steps
from arpo_eval.openai_agent import ChatClient, OpenAIChatAgent
from arpo_eval.runner import evaluate_agent
from osworld_gym.actions import make_action_set
from osworld_gym.support import builtin_tasks
from PIL import Image

UITARS = make_action_set("uitars", screen_size=(1920, 1080))


def oracle_answers(instruction: str) -> list[str]:
    """The built-in oracle of the task with this instruction, as UI-TARS answers with thoughts."""
    from arpo_trainer.demos import oracle_script

    task = next(t for t in builtin_tasks() if t.instruction == instruction)
    return [
        f"Thought: step {i + 1} of the plan.\n{text}"
        for i, text in enumerate(oracle_script(task, UITARS))
    ]


class ChatServer:
    """``POST /v1/chat/completions`` answering the task's oracle turn by turn (or failing)."""

    def __init__(self, fail_with: int | None = None):
        self.requests: list[dict] = []
        self.fail_with = fail_with
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(
                    {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
                )
                if server.fail_with:
                    self.send_response(server.fail_with)
                    self.end_headers()
                    self.wfile.write(b"overloaded")
                    return
                msgs = body["messages"]
                prompt = msgs[1]["content"]
                instruction = prompt.split("## User Instruction\n", 1)[1].strip()
                turn = sum(m["role"] == "assistant" for m in msgs)
                answers = oracle_answers(instruction)
                text = answers[turn] if turn < len(answers) else "Action: finished(content='')"
                reply = {
                    "id": "x",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": text},
                        }
                    ],
                }
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_openai_agent_sends_the_uitars_conversation_with_base64_screenshots(tmp_path):
    with ChatServer() as server:
        rc = main(
            [
                "run",
                "--agent",
                "openai",
                "--model",
                "ui-tars",
                "--base-url",
                server.url,
                "--api-key",
                "sk-test",
                "--tasks",
                "builtin:os",
                "--provider",
                "fake",
                "--settle-max-s",
                "0",
                "--out",
                str(tmp_path),
                "--no-progress",
                "--history-images",
                "2",
            ]
        )
    assert rc == 0
    manifest, records = read_run(tmp_path)
    scores = {r.task_id: r.score for r in records}
    assert manifest.action_space == "uitars" and manifest.model == "ui-tars"
    assert scores["os-infeasible-001"] == 1.0  # the oracle's call_user() is FAIL
    assert all(r.infra_error is None for r in records)

    first = server.requests[0]
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer sk-test"
    body = first["body"]
    assert body["model"] == "ui-tars" and body["temperature"] == 0.6 and body["max_tokens"] == 1024
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "user"]
    assert "## User Instruction" in body["messages"][1]["content"]
    url = body["messages"][2]["content"][0]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).size == (1920, 1080)

    # the third turn of a task sees its earlier answers; only the last 2 screenshots are images
    third = next(
        r["body"]["messages"]
        for r in server.requests
        if sum(m["role"] == "assistant" for m in r["body"]["messages"]) == 2
    )
    assert [m["role"] for m in third[2:]] == ["user", "assistant", "user", "assistant", "user"]
    assert third[2]["content"] == "(earlier screenshot omitted)"
    assert all(isinstance(m["content"], list) for m in third[4::2])

    # the report's raw material: thought + action per step, in OSWorld's traj.jsonl
    ep = next(r for r in records if r.task_id == "os-mkdir-001")
    steps = read_steps(ep.episode_dir)
    assert steps[0]["response"].startswith("Thought: step 1 of the plan.\nAction: hotkey(")


def test_an_unreachable_endpoint_is_an_infra_error_after_retries():
    with ChatServer(fail_with=503) as server:

        def agent():
            client = ChatClient(server.url, "ui-tars", timeout=5, retries=2, backoff=0.01)
            return OpenAIChatAgent(client, UITARS.describe())

        tasks = [builtin_tasks("os")["os-infeasible-001"]]
        records = evaluate_agent(
            agent,
            tasks,
            env_kwargs={"provider": "fake", "settle": None, "action_set": "uitars"},
            infra_retries=0,
            progress=False,
        )
    assert records[0].score is None and "503" in records[0].infra_error
    assert len(server.requests) == 2


def test_a_client_error_is_not_retried():
    with ChatServer(fail_with=400) as server:
        client = ChatClient(server.url, "ui-tars", timeout=5, retries=3, backoff=0.01)
        with pytest.raises(AgentError, match="rejected"):
            client.complete([{"role": "user", "content": "hi"}])
    assert len(server.requests) == 1


def test_tiny_transformers_agent_runs_end_to_end(tmp_path):
    from arpo_trainer.tiny import build_tiny_vlm

    model_dir = build_tiny_vlm(seed=0).save(tmp_path / "tiny-ckpt")
    ids = tmp_path / "ids.txt"
    ids.write_text("os-infeasible-001\nos-copy-001\n")
    out = tmp_path / "run"
    rc = main(
        [
            "run",
            "--agent",
            "hf",
            "--model",
            str(model_dir),
            "--tasks",
            str(ids),
            "--provider",
            "fake",
            "--settle-max-s",
            "0",
            "--max-steps",
            "3",
            "--max-tokens",
            "8",
            "--temperature",
            "1.0",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert rc == 0
    manifest, records = read_run(out)
    assert manifest.model == "tiny-ckpt" and manifest.agent == "hf"
    assert manifest.action_space == "uitars"
    assert len(records) == 2 and all(r.infra_error is None for r in records)
    for r in records:
        steps = read_steps(r.episode_dir)
        assert 1 <= len(steps) <= 3 and all("response" in s for s in steps)
        assert (out / "pyautogui").exists() is False
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"]["scored_tasks"] == 2


def test_the_hf_agent_under_the_action_grammar_writes_only_parsable_actions(tmp_path):
    """``--action-grammar``: the random tiny model, which writes almost no parsable action on its
    own, answers every turn with a well-formed UI-TARS call inside the image frame."""
    from arpo_trainer.tiny import build_tiny_vlm

    model_dir = build_tiny_vlm(seed=0).save(tmp_path / "tiny-ckpt")
    ids = tmp_path / "ids.txt"
    ids.write_text("os-copy-001\nos-mkdir-001\n")
    out = tmp_path / "run"
    args = ["run", "--agent", "hf", "--model", str(model_dir), "--tasks", str(ids)]
    args += ["--provider", "fake", "--settle-max-s", "0", "--max-steps", "3", "--trials", "2"]
    args += ["--max-tokens", "24", "--temperature", "1.0", "--screen", "640x360"]
    assert main([*args, "--out", str(out), "--no-progress", "--action-grammar"]) == 0
    _, records = read_run(out)
    steps = [s for r in records for s in read_steps(r.episode_dir)]
    assert len(records) == 4 and len(steps) >= 4
    assert [s["info"]["action_error"] for s in steps if s["info"].get("action_error")] == []
    assert all(s["response"].startswith("Action: ") for s in steps)
