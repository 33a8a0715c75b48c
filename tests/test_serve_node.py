"""Node clients against ``accord serve``, unchanged: the official ``openai`` package's chat
completions (one create, one parse with ``zodResponseFormat``, one stream: tests/node/roundtrip.mjs)
and Responses API (``responses.parse`` and ``responses.stream`` with ``zodTextFormat``), the
Vercel AI SDK's ``generateObject`` with its default provider ``openai("model")``, which speaks the
Responses API (tests/node/responses.mjs), and the official ``@anthropic-ai/sdk``'s Messages API
(``messages.parse`` and ``messages.stream`` with ``zodOutputFormat``, and a forced tool call:
tests/node/messages.mjs). Another language's clients work as they are.

The packages come from npm through the project's own set-up (``make test`` runs ``npm ci`` in
tests/node, from its committed lockfile); without them these tests fail, they are not skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

from serving import CLIENT_KEY

NODE_DIR = Path(__file__).resolve().parent / "node"
NOISY = ['{"stars": 2, "sentiment": "negative"}', "{stars: 4, sentiment: 'positive'}", '```json\n{"stars": 4, "sentiment": "positive"}\n```',
         '{"stars": "4", "sentiment": "positive"}']  # fmt: skip


def _node(*packages: str) -> str:
    node = shutil.which("node")
    assert node is not None, "node is not installed (the project's set-up needs Node 20 and npm)"
    for package in packages:
        assert (NODE_DIR / "node_modules" / package / "package.json").exists(), (
            f"the Node package {package} is missing: make test installs it (npm ci --prefix tests/node)"
        )
    return node


def _run(script: str, env: dict[str, str], *packages: str) -> dict[str, Any]:
    """What ``script`` (in tests/node) printed as JSON, run by node with ``env`` beside the process's own."""
    done = subprocess.run([_node(*packages), str(NODE_DIR / script)], capture_output=True, text=True, env={**os.environ, **env},
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_the_node_client_round_trips(serve_proxy: Any) -> None:
    prompt = f"Review: 'Great pen.' [{uuid.uuid4().hex[:8]}] FAKE:{json.dumps({'say': NOISY})}"
    env = {"ACCORD_SERVE_URL": serve_proxy.url, "ACCORD_SERVE_KEY": CLIENT_KEY, "ACCORD_SERVE_PROMPT": prompt}
    out = _run("roundtrip.mjs", env, "openai")
    right = {"stars": 4, "sentiment": "positive"}
    assert out["create"]["object"] == "chat.completion" and out["create"]["id"].startswith("chatcmpl-")
    assert json.loads(out["create"]["content"]) == right
    assert out["create"]["accord"]["calls"] == 4 and out["create"]["accord"]["stable"] is True  # the vote, not the first ballot
    assert out["parse"]["parsed"] == right and out["parse"]["accord"]["stable"] is True
    assert json.loads(out["stream"]["text"]) == right
    assert out["stream"]["finish"] == "stop" and out["stream"]["usage"]["total_tokens"] > 0 and out["stream"]["chunks"] >= 4


def test_node_responses_clients_and_the_ai_sdk_get_the_decided_value(serve_proxy: Any, fake_upstream: Any) -> None:
    tag = uuid.uuid4().hex[:8]
    prompt = f"Review: 'Great pen.' [{tag} {{which}}] FAKE:{json.dumps({'say': NOISY})}"
    env = {"OPENAI_BASE_URL": serve_proxy.url, "OPENAI_API_KEY": CLIENT_KEY, "ACCORD_SERVE_PROMPT": prompt}
    out = _run("responses.mjs", env, "openai", "ai", "@ai-sdk/openai")
    right = {"stars": 4, "sentiment": "positive"}
    parse = out["parse"]
    assert parse["parsed"] == right and json.loads(parse["text"]) == right
    assert parse["object"] == "response" and parse["id"].startswith("resp_") and parse["status"] == "completed"
    assert parse["accord"]["calls"] == 4 and parse["accord"]["stable"] is True  # the vote, not the first ballot
    billed = fake_upstream.stats()["billed_by_prompt"][prompt.replace("{which}", "parse")]
    assert parse["usage"]["input_tokens"] == billed["prompt_tokens"] and parse["usage"]["output_tokens"] == billed["completion_tokens"]
    assert out["stream"]["parsed"] == right
    assert out["stream"]["types"][0] == "response.created" and out["stream"]["types"][-1] == "response.completed"
    ai = out["aiSdk"]  # the AI SDK's default provider: the Responses API, no accord field, the server's default policy
    assert ai["object"] == right and ai["finishReason"] == "stop" and ai["modelId"] == "fake-model"
    assert ai["accord"]["stable"] is True and ai["accord"]["calls"] >= 3
    billed = fake_upstream.stats()["billed_by_prompt"][prompt.replace("{which}", "ai-sdk")]
    assert ai["usage"]["inputTokens"] == billed["prompt_tokens"] and ai["usage"]["outputTokens"] == billed["completion_tokens"]


def test_the_node_anthropic_sdk_gets_the_decided_value(serve_proxy: Any, fake_upstream: Any) -> None:
    tag = uuid.uuid4().hex[:8]
    prompt = f"Review: 'Great pen.' [{tag} {{which}}] FAKE:{json.dumps({'say': NOISY})}"
    env = {"ANTHROPIC_BASE_URL": serve_proxy.root, "ANTHROPIC_API_KEY": CLIENT_KEY, "ACCORD_SERVE_PROMPT": prompt}
    out = _run("messages.mjs", env, "@anthropic-ai/sdk", "zod")
    right = {"stars": 4, "sentiment": "positive"}
    parse = out["parse"]
    assert parse["parsed"] == right and json.loads(parse["text"]) == right and parse["stop"] == "end_turn"
    assert parse["type"] == "message" and parse["id"].startswith("msg_")
    assert parse["accord"]["calls"] == 4 and parse["accord"]["stable"] is True  # the vote, not the first ballot
    billed = fake_upstream.stats()["billed_by_prompt"][prompt.replace("{which}", "parse")]
    assert parse["usage"]["input_tokens"] == billed["prompt_tokens"] and parse["usage"]["output_tokens"] == billed["completion_tokens"]
    tool = out["tool"]
    assert tool["block"]["type"] == "tool_use" and tool["block"]["name"] == "Review" and tool["block"]["input"] == right
    assert tool["stop"] == "tool_use" and tool["accord"]["calls"] == 4
    stream = out["stream"]
    assert stream["parsed"] == right and stream["accord"]["calls"] == 4
    assert stream["types"][0] == "message_start" and stream["types"][-1] == "message_stop" and "content_block_delta" in stream["types"]
    assert out["toolStream"]["block"]["input"] == right and out["toolStream"]["pieces"] >= 1 and out["toolStream"]["stop"] == "tool_use"
