"""The official Node ``openai`` package against ``accord serve``, unchanged: one create, one parse
(``zodResponseFormat``) and one stream round trip (tests/node/roundtrip.mjs). Another language's
client works as it is.

The package comes from npm through the project's own set-up (``make test`` runs ``npm ci`` in
tests/node, from its committed lockfile); without it this test fails, it is not skipped.
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


def test_the_node_client_round_trips(serve_proxy: Any) -> None:
    node = shutil.which("node")
    assert node is not None, "node is not installed (the project's set-up needs Node 20 and npm)"
    assert (NODE_DIR / "node_modules" / "openai" / "package.json").exists(), (
        "the Node openai package is missing: make test installs it (npm ci --prefix tests/node)"
    )
    prompt = f"Review: 'Great pen.' [{uuid.uuid4().hex[:8]}] FAKE:{json.dumps({'say': NOISY})}"
    env = {**os.environ, "ACCORD_SERVE_URL": serve_proxy.url, "ACCORD_SERVE_KEY": CLIENT_KEY, "ACCORD_SERVE_PROMPT": prompt}
    done = subprocess.run([node, str(NODE_DIR / "roundtrip.mjs")], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    right = {"stars": 4, "sentiment": "positive"}
    assert out["create"]["object"] == "chat.completion" and out["create"]["id"].startswith("chatcmpl-")
    assert json.loads(out["create"]["content"]) == right
    assert out["create"]["accord"]["calls"] == 4 and out["create"]["accord"]["stable"] is True  # the vote, not the first ballot
    assert out["parse"]["parsed"] == right and out["parse"]["accord"]["stable"] is True
    assert json.loads(out["stream"]["text"]) == right
    assert out["stream"]["finish"] == "stop" and out["stream"]["usage"]["total_tokens"] > 0 and out["stream"]["chunks"] >= 4


