"""An agent behind an OpenAI-compatible chat-completions endpoint (vLLM ``serve`` of UI-TARS).

The conversation follows ARPO's UI-TARS layout (ARPO.md §1.5) and the trainer's
:class:`~arpo_trainer.chat.TurnEncoder`, so a served checkpoint sees what it was trained on::

    system:    "You are a helpful assistant."
    user:      the UI-TARS prompt with the instruction (the action set's describe())
    user:      [screenshot 0]          (image_url, data:image/png;base64,...)
    assistant: answer 0
    user:      [screenshot 1]
    ...
    user:      [screenshot n]          -> the endpoint answers turn n

Only the latest ``history_images`` screenshots are sent as images; older ones become the
trainer's text marker. Requests carry ``model``, ``messages``, ``temperature``, ``top_p`` and
``max_tokens``; connection errors, 429 and 5xx are retried with backoff, anything else raises
:class:`~arpo_eval.agent_spec.AgentError` (the episode is then an infrastructure error, not a 0).

Serving UI-TARS-1.5-7B as ARPO does::

    vllm serve ByteDance-Seed/UI-TARS-1.5-7B --served-model-name ui-tars \\
        --limit-mm-per-prompt '{"image": 16}' --port 9000
    arpo-eval run --agent openai --model ui-tars --base-url http://127.0.0.1:9000/v1 ...
"""

from __future__ import annotations

import base64
import io
import logging
import os
import time
from typing import Any

import httpx
import numpy as np
from PIL import Image

from arpo_eval.agent_spec import AgentBundle, AgentError, AgentSpec

log = logging.getLogger(__name__)

#: The text that stands in for a screenshot older than the image budget (the trainer's marker).
OMITTED_SCREENSHOT = "(earlier screenshot omitted)"
SYSTEM_PROMPT = "You are a helpful assistant."


class ChatClient:
    """Minimal client for ``POST {base_url}/chat/completions``.

    Args:
        base_url: e.g. ``http://127.0.0.1:9000/v1``.
        model: the served model name.
        api_key: bearer token.
        timeout: seconds per request.
        retries: attempts on connection errors, HTTP 429 and 5xx.
        backoff: seconds before the first retry (doubled each time).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 120.0,
        retries: int = 3,
        backoff: float = 1.0,
    ):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.retries = max(1, retries)
        self.backoff = backoff
        key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self._http = httpx.Client(timeout=timeout, headers={"Authorization": f"Bearer {key}"})

    def complete(self, messages: list[dict[str, Any]], **params: Any) -> str:
        """The assistant text of one completion.

        Raises:
            AgentError: the endpoint failed after the retries, or answered something unreadable.
        """
        body = {"model": self.model, "messages": messages, **params}
        delay = self.backoff
        last = ""
        for attempt in range(1, self.retries + 1):
            try:
                resp = self._http.post(self.url, json=body)
            except httpx.HTTPError as e:
                last = f"{type(e).__name__}: {e}"
            else:
                if resp.status_code == 200:
                    return self._text(resp)
                last = f"HTTP {resp.status_code}: {resp.text[:300]}"
                if resp.status_code != 429 and resp.status_code < 500:
                    raise AgentError(f"{self.url} rejected the request: {last}")
            if attempt < self.retries:
                log.warning(
                    "chat completion failed (%s); retry %d/%d in %.1f s",
                    last,
                    attempt,
                    self.retries - 1,
                    delay,
                )
                time.sleep(delay)
                delay *= 2
        raise AgentError(
            f"{self.url} failed {self.retries} times; last error: {last}. "
            "Is the model server running (vllm serve ...) at --base-url?"
        )

    def _text(self, resp: httpx.Response) -> str:
        try:
            content = resp.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise AgentError(
                f"{self.url} answered without choices[0].message.content: {resp.text[:300]}"
            ) from e
        if isinstance(content, list):  # content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return str(content or "")

    def close(self) -> None:
        self._http.close()


def png_data_url(frame: np.ndarray) -> str:
    """A screenshot as a ``data:image/png;base64,...`` URL."""
    buf = io.BytesIO()
    Image.fromarray(np.asarray(frame, dtype=np.uint8)).save(buf, format="PNG", compress_level=1)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def prompt_text(template: str, instruction: str) -> str:
    """The first user message (the trainer's rule: fill ``{instruction}`` or append it)."""
    if "{instruction}" in template:
        return template.replace("{instruction}", instruction)
    return f"{template}\n\n## User Instruction\n{instruction}"


class OpenAIChatAgent:
    """UI-TARS over chat completions; see the module docstring.

    Args:
        client: the endpoint.
        prompt_template: the first user message with an ``{instruction}`` slot.
        history_images: screenshots sent as images (the latest ones).
        system_prompt: the system message.
        **sampling: ``temperature``, ``top_p``, ``max_tokens`` ... sent with every request.
    """

    def __init__(
        self,
        client: ChatClient,
        prompt_template: str,
        *,
        history_images: int = 15,
        system_prompt: str = SYSTEM_PROMPT,
        **sampling: Any,
    ):
        self.client = client
        self.prompt_template = prompt_template
        self.history_images = max(1, history_images)
        self.system_prompt = system_prompt
        self.sampling = sampling
        self._instruction = ""
        self._shots: list[str] = []
        self._answers: list[str] = []

    def reset(self, task: Any) -> None:
        self._instruction = getattr(task, "instruction", "") or ""
        self._shots, self._answers = [], []

    def messages(self) -> list[dict[str, Any]]:
        """The request's messages for the next turn."""
        msgs: list[dict[str, Any]] = [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": prompt_text(self.prompt_template, self._instruction)},
        ]
        keep_from = max(0, len(self._shots) - self.history_images)
        for k, url in enumerate(self._shots):
            if k >= keep_from:
                content: Any = [{"type": "image_url", "image_url": {"url": url}}]
            else:
                content = OMITTED_SCREENSHOT
            msgs.append({"role": "user", "content": content})
            if k < len(self._answers):
                msgs.append({"role": "assistant", "content": self._answers[k]})
        return msgs

    def act(self, obs: dict[str, Any], info: dict[str, Any]) -> str:
        self._instruction = self._instruction or str(obs.get("instruction", ""))
        self._shots.append(png_data_url(obs["screenshot"]))
        text = self.client.complete(self.messages(), **self.sampling)
        self._answers.append(text)
        return text


def openai_bundle(spec: AgentSpec) -> AgentBundle:
    """The ``--agent openai`` bundle: one client and agent per desktop."""
    from osworld_gym.actions import make_action_set

    if not spec.base_url:
        raise ValueError("--agent openai needs --base-url (e.g. http://127.0.0.1:9000/v1)")
    if not spec.model:
        raise ValueError("--agent openai needs --model (the served model name, e.g. ui-tars)")
    aset_name = spec.action_set or "uitars"
    aset_kwargs = dict(spec.extra.get("action_set_kwargs") or {})
    template = make_action_set(aset_name, screen_size=spec.screen_size, **aset_kwargs).describe()
    sampling = {"temperature": spec.temperature, "top_p": spec.top_p, "max_tokens": spec.max_tokens}

    def make() -> OpenAIChatAgent:
        client = ChatClient(
            spec.base_url or "",
            spec.model or "",
            api_key=spec.api_key,
            timeout=spec.request_timeout,
            retries=spec.retries,
        )
        return OpenAIChatAgent(client, template, history_images=spec.history_images, **sampling)

    name = spec.name or "".join(c if c.isalnum() or c in "-_." else "_" for c in spec.model)
    return AgentBundle(
        make,
        aset_name,
        aset_kwargs,
        name,
        {
            "agent": "openai",
            "model": spec.model,
            "base_url": spec.base_url,
            **sampling,
            "history_images": spec.history_images,
        },
    )
