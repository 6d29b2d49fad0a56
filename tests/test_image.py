"""The Dockerfile built for real with podman and run the way Inference Endpoints runs a custom image: port 80 inside
mapped to a loopback port, the models named by environment variables (the offline model folders mounted read-only),
``HF_TOKEN`` as an environment secret. The base is Debian's Python made by scripts/container-setup.sh (no image
registry is reachable here for the production CUDA PyTorch base), with CI's versions (``CONSTRAINTS``).

The tests share one container and run in file order; the last one stops it."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from conftest import REPO
from test_server import Server, free_port

pytestmark = pytest.mark.slow

CONF = REPO / "scripts" / "containers.conf"
IMAGE = "localhost/speakerscribe:test"
SECRET = "hf_test-secret-never-in-logs-7f3a9c"
GRACEFUL_TIMEOUT_S = 60  # longer than one meeting request on a busy 2-core machine, so SIGTERM lets it finish


def podman(*args: str, timeout: float = 300, check: bool = True, env: dict[str, str] | None = None):
    """Run podman with the settings that work on these machines (scripts/containers.conf)."""
    environ = {**(env or os.environ), "CONTAINERS_CONF": str(CONF)}
    proc = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, env=environ)
    if check and proc.returncode != 0:
        pytest.fail(f"podman {' '.join(args[:2])} failed ({proc.returncode}): {proc.stderr[-3000:]}")
    return proc


def report(pytestconfig, line: str) -> None:
    """A line in the test log even without -s (the build's cost belongs in CI's log)."""
    with pytestconfig.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
        print(line, flush=True)


def host_pip_settings() -> dict[str, str]:
    """The host's pip settings as pip merges them (configuration files, then PIP_* variables over them)."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
    ).stdout
    files, env = {}, {}
    for line in out.splitlines():
        name, _, value = line.partition("=")
        scope, _, key = name.partition(".")
        (env if scope == ":env:" else files)[key] = ast.literal_eval(value)
    return {**files, **env}


def local_paths(value: str) -> list[Path]:
    """Host paths a pip setting refers to: files, folders and file:// indexes (whose files lie next to simple/)."""
    paths = []
    for word in value.split():
        path = Path(word.removeprefix("file://"))
        if path.is_absolute() and path.exists():
            paths.append(path.parent if path.name == "simple" else path)
    return paths


def pip_share(folder: Path) -> list[str]:
    """--volume options that give pip inside the build what the host's pip uses: its settings as /etc/pip.conf and,
    read-only at the same paths, the local wheel folders and indexes, the constraint file and the CA bundle (a
    proxy's certificate may be in it). Without them CI would download torch and CUDA's libraries (about 4 GB) again."""
    settings = host_pip_settings()
    conf = folder / "pip.conf"
    conf.write_text("[global]\n" + "".join(f"{key} = {value}\n" for key, value in settings.items()))
    volumes = ["--volume", f"{conf}:/etc/pip.conf:ro"]
    for path in sorted({p for value in settings.values() for p in local_paths(value)}):
        volumes += ["--volume", f"{path}:{path}:ro"]
    return volumes


@pytest.fixture(scope="module")
def base_image() -> str:
    """The tooling and the base image (made once, then found by its tag); a machine without them fails here."""
    proc = subprocess.run(["bash", "scripts/container-setup.sh"], cwd=REPO, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        pytest.fail(f"this machine cannot build or run containers: {proc.stderr[-3000:]}")
    base = proc.stdout.strip().splitlines()[-1]
    probe = podman("run", "--rm", base, "python", "-c", "print('ok')", check=False)
    if probe.stdout.strip() != "ok":
        pytest.fail(f"this machine cannot run containers: {probe.stderr[-3000:]}")
    return base


@pytest.fixture(scope="module")
def image(base_image, tmp_path_factory, pytestconfig) -> str:
    """The Dockerfile built (docker format: the OCI format drops SHELL and HEALTHCHECK), its time and size logged."""
    start = time.monotonic()
    podman(
        "build",
        "--format=docker",
        "--network=host",
        f"--tag={IMAGE}",
        f"--build-arg=BASE_IMAGE={base_image}",
        "--build-arg=CONSTRAINTS=constraints-ci.txt",
        *pip_share(tmp_path_factory.mktemp("pip")),
        str(REPO),
        timeout=1800,
    )
    seconds = time.monotonic() - start
    size = int(podman("image", "inspect", "--format={{.Size}}", IMAGE).stdout)
    report(pytestconfig, f"\nimage {IMAGE}: built in {seconds:.0f} s, {size / 1e9:.2f} GB (base {base_image})")
    return IMAGE


@pytest.fixture(scope="module")
def mounted_models(real_models, tmp_path_factory) -> Path:
    """A readable copy of the offline models: the container's user (1000) cannot read a root-owned 0600 file."""
    dest = tmp_path_factory.mktemp("models")
    for name in ("whisper-tiny.en", "diarization"):
        subprocess.run(["cp", "-rL", str(real_models / name), str(dest / name)], check=True)
    subprocess.run(["chmod", "-R", "a+rX", str(dest)], check=True)
    return dest


@dataclass(frozen=True)
class Container:
    """The running container: its name, its URL on loopback and when it was started (monotonic seconds)."""

    name: str
    url: str
    started: float


@pytest.fixture(scope="module")
def container(image, mounted_models):
    port = free_port()
    name = f"speakerscribe-test-{port}"
    podman(
        "run",
        "--detach",
        f"--name={name}",
        f"--publish=127.0.0.1:{port}:80",
        "--env=HF_TOKEN",  # the value from podman's environment, as Endpoints passes a secret: not on a command line
        "--env=ASR_MODEL=/models/whisper-tiny.en",
        "--env=DIARIZATION_MODEL=/models/diarization",
        "--env=HF_HUB_OFFLINE=1",  # nothing may download weights here
        f"--env=GRACEFUL_TIMEOUT_S={GRACEFUL_TIMEOUT_S}",
        f"--volume={mounted_models}:/models:ro",
        image,
        env={**os.environ, "HF_TOKEN": SECRET},
    )
    yield Container(name, f"http://127.0.0.1:{port}", time.monotonic())
    podman("rm", "--force", "--time=0", name, check=False)


def health_window_s(image: str) -> float:
    """The image's own HEALTHCHECK start period, in seconds."""
    check = json.loads(podman("image", "inspect", "--format={{json .HealthCheck}}", image).stdout)
    assert check and check["Test"][0] == "CMD", check
    return check["StartPeriod"] / 1e9


@pytest.fixture(scope="module")
def healthy(container, image, pytestconfig) -> float:
    """Seconds from the container's start until /health said 200, polled within the image's own start period. Every
    test that talks to the container waits here, so none of them meets the models still loading. A health request
    that times out counts as not yet healthy, as a refused connection does: CI runs this beside the whole suite on
    two cores, where the server can take over 2 s to answer while the models load in its other thread."""
    window = health_window_s(image)
    assert window >= 60
    status, last_error = None, "no answer yet"
    while time.monotonic() - container.started < window:
        running = podman("inspect", "--format={{.State.Running}}", container.name).stdout.strip()
        assert running == "true", podman("logs", container.name).stderr[-3000:]
        try:
            response = requests.get(container.url + "/health", timeout=5)
            status, last_error = response.status_code, response.text[:200]
        except (requests.ConnectionError, requests.Timeout) as error:
            status, last_error = None, type(error).__name__
        if status == 200:
            seconds = time.monotonic() - container.started
            report(pytestconfig, f"container healthy {seconds:.0f} s after its start (window {window:.0f} s)")
            return seconds
        time.sleep(0.5)
    logs = podman("logs", container.name, check=False)
    pytest.fail(
        f"not healthy after {window:.0f} s (last: {status} {last_error}): {(logs.stdout + logs.stderr)[-3000:]}"
    )


def test_the_server_runs_as_uid_1000_and_is_healthy_within_the_images_health_check_window(container, image, healthy):
    assert healthy < health_window_s(image)
    assert podman("healthcheck", "run", container.name, check=False).returncode == 0  # the image's own command
    uids = podman("exec", container.name, "grep", "^Uid:", "/proc/1/status").stdout.split()[1:]
    assert uids == ["1000"] * 4


def test_a_meeting_gets_the_same_answer_from_the_container_as_from_the_host_server(
    container, healthy, real_models, meeting, tmp_path
):
    host = Server(
        {
            "ASR_MODEL": str(real_models / "whisper-tiny.en"),
            "DIARIZATION_MODEL": str(real_models / "diarization"),
            "HF_HUB_OFFLINE": "1",
        },
        tmp_path / "host.log",
    )
    try:
        host.wait_ready(timeout=300)
        answers = []
        for url in (container.url, host.url):
            r = requests.post(
                url + "/predict", data=meeting.wav.read_bytes(), headers={"Content-Type": "audio/wav"}, timeout=600
            )
            assert r.status_code == 200, r.text
            assert SECRET not in r.text
            answers.append({k: v for k, v in r.json().items() if k != "timings"})
    finally:
        host.stop()
    in_container, on_host = answers
    assert len({u["speaker"] for u in on_host["speakers"]}) == 2 and len(on_host["text"].split()) > 20
    assert in_container == on_host


def test_errors_and_logs_never_show_the_token(container, healthy):
    r = requests.post(container.url + "/predict", data=b"not audio", headers={"Content-Type": "audio/wav"}, timeout=60)
    assert r.status_code == 400 and "error" in r.json()
    assert SECRET not in r.text
    logs = podman("logs", container.name)
    assert "models loaded; ready" in logs.stdout + logs.stderr
    assert SECRET not in logs.stdout + logs.stderr


def test_podman_stop_drains_the_running_request_and_exits_0_within_the_graceful_timeout(container, healthy, meeting):
    answer: dict[str, requests.Response] = {}

    def post() -> None:
        body = meeting.wav.read_bytes()
        answer["r"] = requests.post(
            container.url + "/predict", data=body, headers={"Content-Type": "audio/wav"}, timeout=600
        )

    client = threading.Thread(target=post)
    client.start()
    time.sleep(1.5)  # the request is running (a meeting takes several seconds on CPU)
    start = time.monotonic()
    podman("stop", f"--time={GRACEFUL_TIMEOUT_S + 30}", container.name, timeout=GRACEFUL_TIMEOUT_S + 60)
    seconds = time.monotonic() - start
    client.join(timeout=60)
    assert answer["r"].status_code == 200, answer["r"].text
    assert podman("inspect", "--format={{.State.ExitCode}}", container.name).stdout.strip() == "0"  # not killed
    assert seconds < GRACEFUL_TIMEOUT_S
    logs = podman("logs", container.name)
    assert "shutting down: 1 running" in logs.stdout + logs.stderr
    assert SECRET not in logs.stdout + logs.stderr
