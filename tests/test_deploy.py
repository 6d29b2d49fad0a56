"""python -m speakerscribe.deploy against a local stand-in for the Hub and the Inference Endpoints API
(speakerscribe_dev/endpoints_api.py) on 127.0.0.1: the request it makes is what huggingface_hub sends for the same
arguments, progress is reported until the endpoint runs, and refusals are clear."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest
from conftest import REPO
from test_server import free_port

from speakerscribe_dev.endpoints_api import create_app

TOKEN = "hf_standin_secret_token"


@pytest.fixture()
def api():
    import uvicorn

    app, state = create_app(token=TOKEN, namespace="alice", over_quota=("nvidia-h100",))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    state.base_url = f"http://127.0.0.1:{port}"
    yield state
    server.should_exit = True
    thread.join(10)


def deploy(api, *args: str, token: str | None = TOKEN) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "INFERENCE_ENDPOINTS_API", "HF_HUB_OFFLINE")}
    env.update(HF_ENDPOINT=api.base_url, INFERENCE_ENDPOINTS_API=api.base_url + "/v2", HF_HUB_DISABLE_TELEMETRY="1")
    if token is not None:
        env["HF_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "speakerscribe.deploy", *args, "--poll", "0.05"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


REPO_ARGS = (
    "--name",
    "meetings",
    "--repository",
    "alice/speakerscribe",
    "--asr-model",
    "openai/whisper-large-v3",
    "--diarization-model",
    "pyannote/speaker-diarization-community-1",
    "--env",
    "MAX_CONCURRENCY=2",
)


def test_dry_run_prints_the_arguments_with_the_secret_masked_and_sends_nothing(api):
    proc = deploy(api, *REPO_ARGS, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    call = json.loads(proc.stdout)["create_inference_endpoint"]
    assert call["secrets"] == {"HF_TOKEN": "***"} and TOKEN not in proc.stdout + proc.stderr
    assert call["env"] == {
        "ASR_MODEL": "openai/whisper-large-v3",
        "DIARIZATION_MODEL": "pyannote/speaker-diarization-community-1",
        "MAX_CONCURRENCY": "2",
    }
    assert (call["repository"], call["framework"], call["task"]) == ("alice/speakerscribe", "pytorch", "custom")
    request = json.loads(proc.stdout)["request"]
    assert request["method"] == "POST" and request["url"].endswith("/endpoint/YOUR-NAMESPACE")
    assert request["json"]["model"]["secrets"] == {"HF_TOKEN": "***"}
    assert api.requests == []


def test_deploy_sends_what_huggingface_hub_sends_and_reports_progress_until_running(api):
    dry = json.loads(deploy(api, *REPO_ARGS, "--dry-run").stdout)["create_inference_endpoint"]
    proc = deploy(api, *REPO_ARGS)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"{api.base_url}/endpoints/meetings"
    states = [line.split(": ")[-1] for line in proc.stderr.splitlines() if "] meetings: " in line]
    assert states == ["pending", "initializing", "running"]
    assert TOKEN not in proc.stdout + proc.stderr
    created = [r for r in api.requests if r["method"] == "POST"]
    assert len(created) == 1 and created[0]["path"] == "/v2/endpoint/alice"
    assert created[0]["authorization"] == f"Bearer {TOKEN}"
    sent = created[0]["json"]
    printed = json.loads(deploy(api, *REPO_ARGS, "--dry-run").stdout)["request"]["json"]
    assert printed == {**sent, "model": {**sent["model"], "secrets": {"HF_TOKEN": "***"}}}  # the dry run's payload
    assert sent["model"]["secrets"] == {"HF_TOKEN": TOKEN} and sent["model"]["image"] == {"huggingface": {}}
    assert sent["compute"]["scaling"] == {"maxReplica": 1, "minReplica": 0, "scaleToZeroTimeout": 15}

    # huggingface_hub itself, called with the dry run's arguments (the real secret), sends the same payload
    api.requests.clear()
    kwargs = {**dry, "name": "meetings-2", "secrets": {"HF_TOKEN": TOKEN}}
    script = (
        "import json, sys\n"
        "from huggingface_hub import HfApi, constants\n"
        "constants.INFERENCE_ENDPOINTS_ENDPOINT = sys.argv[1] + '/v2'\n"
        "HfApi(endpoint=sys.argv[1], token=sys.argv[2]).create_inference_endpoint(**json.loads(sys.argv[3]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    direct_call = subprocess.run(
        [sys.executable, "-c", script, api.base_url, TOKEN, json.dumps(kwargs)], env=env, capture_output=True, text=True
    )
    assert direct_call.returncode == 0, direct_call.stderr
    direct = [r for r in api.requests if r["method"] == "POST"][0]["json"]
    assert {**direct, "name": "meetings"} == sent


def test_offline_mode_is_reported_not_a_traceback(api):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_TOKEN": TOKEN, "HF_ENDPOINT": api.base_url}
    proc = subprocess.run(
        [sys.executable, "-m", "speakerscribe.deploy", *REPO_ARGS],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1 and "could not create the endpoint" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_custom_image_with_autoscaling(api):
    proc = deploy(
        api,
        "--name",
        "meetings-img",
        "--image",
        "ghcr.io/alice/speakerscribe:1",
        "--asr-model",
        "openai/whisper-large-v3",
        "--min-replica",
        "1",
        "--max-replica",
        "4",
        "--scaling-metric",
        "pendingRequests",
        "--scaling-threshold",
        "2",
        "--no-wait",
    )
    assert proc.returncode == 0, proc.stderr
    sent = [r for r in api.requests if r["method"] == "POST"][0]["json"]
    assert sent["model"]["image"] == {
        "custom": {"url": "ghcr.io/alice/speakerscribe:1", "health_route": "/health", "port": 80}
    }
    scaling = sent["compute"]["scaling"]
    assert scaling["minReplica"] == 1 and scaling["maxReplica"] == 4 and scaling["scaleToZeroTimeout"] is None
    assert scaling["measure"] == {"pendingRequests": 2.0}
    assert not [r for r in api.requests if r["method"] == "GET" and "/v2/" in r["path"]]  # --no-wait


def test_a_refused_token_is_reported_without_printing_it(api):
    proc = deploy(api, *REPO_ARGS, token="hf_wrong_token_value")
    assert proc.returncode == 1
    assert "token was refused (HTTP 401)" in proc.stderr and "Invalid credentials" in proc.stderr
    assert "hf_wrong_token_value" not in proc.stdout + proc.stderr


def test_a_quota_refusal_gives_the_apis_reason(api):
    proc = deploy(api, *REPO_ARGS, "--instance-type", "nvidia-h100")
    assert proc.returncode == 1
    assert "HTTP 402" in proc.stderr and "Quota exceeded" in proc.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (("--name", "Meetings!"), "lowercase"),
        (("--name", "ok", "--min-replica", "3", "--max-replica", "2"), "replicas"),
        (("--name", "ok", "--env", "HF_TOKEN=x"), "secret"),
        (("--name", "ok", "--scaling-metric", "pendingRequests"), "go together"),
    ],
)
def test_arguments_that_cannot_work_are_refused_before_any_call(api, args, message):
    proc = deploy(api, "--repository", "alice/speakerscribe", *args)
    assert proc.returncode == 2 and message in proc.stderr
    assert api.requests == []


def test_no_token_is_a_usage_error(api):
    proc = deploy(api, *REPO_ARGS, token=None)
    assert proc.returncode == 2 and "HF_TOKEN" in proc.stderr and api.requests == []


def test_the_readmes_api_snippet_runs_as_written(api):
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("**Through the API yourself**") :]
    snippet = section[section.index("```python\n") + 10 : section.index("```\n", section.index("```python"))]
    prelude = (
        f"from huggingface_hub import constants\nconstants.INFERENCE_ENDPOINTS_ENDPOINT = {api.base_url!r} + '/v2'\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    env.update(HF_ENDPOINT=api.base_url, HF_TOKEN=TOKEN)
    proc = subprocess.run([sys.executable, "-c", prelude + snippet], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    sent = [r for r in api.requests if r["method"] == "POST"][0]["json"]
    assert sent["model"]["env"]["DIARIZATION_MODEL"] and sent["type"] == "authenticated"
