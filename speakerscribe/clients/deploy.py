"""One command to create an Inference Endpoint running speakerscribe, on ``huggingface_hub.create_inference_endpoint``.

    # this repository (duplicated to your account) on the default container, models named by environment variables
    HF_TOKEN=hf_... python -m speakerscribe.deploy --name meetings --repository you/speakerscribe \\
        --asr-model openai/whisper-large-v3 --diarization-model pyannote/speaker-diarization-community-1

    # the custom image (Dockerfile) from a registry: port 80, health route /health
    HF_TOKEN=hf_... python -m speakerscribe.deploy --name meetings --image ghcr.io/you/speakerscribe:1 ...

``HF_TOKEN`` (or ``--token``) authenticates the API call and is given to the endpoint as the secret ``HF_TOKEN``
(gated models such as pyannote's need it; ``--no-token-secret`` leaves it out). It is never printed: ``--dry-run``
prints the call's arguments and the exact request huggingface_hub would send (method, URL, JSON payload), secrets
masked, and sends nothing. After creating the endpoint the command reports
its state until it runs (``--no-wait`` returns at once). Exit status: 0 created (and running, when waiting), 1 the
API refused or the endpoint failed or timed out, 2 bad arguments.

``HF_ENDPOINT`` points the Hub calls (the token's namespace) elsewhere, as everywhere in huggingface_hub;
``--api-url`` (or ``INFERENCE_ENDPOINTS_API``) does the same for the Inference Endpoints API, which
huggingface_hub otherwise always reaches at its public address.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from typing import Any

NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$")  # the API's endpoint names: 1-32, lowercase, hyphens
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
FINAL_STATES = ("running", "failed", "updateFailed")


class UsageError(Exception):
    """The arguments cannot make a valid endpoint."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m speakerscribe.deploy", description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--repository", help="Hub repository holding this project (a duplicate of it): default container"
    )
    where.add_argument("--image", help="container image URL of the Dockerfile's build: custom container")
    p.add_argument("--name", required=True, help="endpoint name: 1-32 lowercase letters, digits, hyphens")
    p.add_argument("--namespace", default=None, help="user or organisation (default: the token's user)")
    p.add_argument("--revision", default=None, help="repository revision (default container)")
    models = p.add_argument_group("models (environment variables of the endpoint)")
    models.add_argument("--asr-model", default=None, help="ASR_MODEL")
    models.add_argument("--assistant-model", default=None, help="ASSISTANT_MODEL (speculative decoding)")
    models.add_argument("--diarization-model", default=None, help="DIARIZATION_MODEL")
    models.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE", help="any other variable (repeatable)"
    )
    compute = p.add_argument_group("compute")
    compute.add_argument("--vendor", default="aws")
    compute.add_argument("--region", default="us-east-1")
    compute.add_argument("--accelerator", default="gpu", choices=["gpu", "cpu", "neuron"])
    compute.add_argument("--instance-type", default="nvidia-l4", help="e.g. nvidia-l4, nvidia-a10g, intel-spr")
    compute.add_argument("--instance-size", default="x1", help="e.g. x1, x4")
    scaling = p.add_argument_group("scaling")
    scaling.add_argument("--min-replica", type=int, default=0, help="0 scales to zero when idle (default)")
    scaling.add_argument("--max-replica", type=int, default=1)
    scaling.add_argument(
        "--scale-to-zero-timeout", type=int, default=15, help="idle minutes before scaling to zero (min-replica 0)"
    )
    scaling.add_argument(
        "--scaling-metric", choices=["pendingRequests", "hardwareUsage"], default=None, help="autoscaling metric"
    )
    scaling.add_argument("--scaling-threshold", type=float, default=None, help="the metric's target per replica")
    access = p.add_argument_group("access")
    access.add_argument(
        "--type",
        default="authenticated",
        choices=["authenticated", "public", "private"],
        dest="kind",
        help="who may call it: a Hugging Face token (default), anyone, or a private link",
    )
    access.add_argument("--token", default=None, help="Hugging Face token (default: HF_TOKEN)")
    access.add_argument("--no-token-secret", action="store_true", help="do not give the token to the endpoint")
    access.add_argument("--api-url", default=None, help="Inference Endpoints API base (INFERENCE_ENDPOINTS_API)")
    run = p.add_argument_group("run")
    run.add_argument("--dry-run", action="store_true", help="print the call's arguments (secrets masked), send nothing")
    run.add_argument("--no-wait", action="store_true", help="return once the endpoint is created")
    run.add_argument("--timeout", type=float, default=1800, help="seconds to wait for it to run (default 1800)")
    run.add_argument("--poll", type=float, default=10, help="seconds between state checks (default 10)")
    return p


def endpoint_arguments(args: argparse.Namespace, token: str | None) -> dict[str, Any]:
    """The keyword arguments of ``HfApi.create_inference_endpoint``; UsageError when they cannot work."""
    if not NAME.match(args.name):
        raise UsageError(f"--name {args.name[:60]!r}: use 1-32 lowercase letters, digits and hyphens")
    if args.max_replica < 1 or args.min_replica < 0 or args.min_replica > args.max_replica:
        raise UsageError(
            f"replicas: need 0 <= --min-replica <= --max-replica and --max-replica >= 1 (got {args.min_replica}, "
            f"{args.max_replica})"
        )
    if (args.scaling_metric is None) != (args.scaling_threshold is None):
        raise UsageError("--scaling-metric and --scaling-threshold go together")
    if args.scale_to_zero_timeout < 1:
        raise UsageError("--scale-to-zero-timeout is in minutes, at least 1")
    env: dict[str, str] = {}
    for flag, key in (
        ("asr_model", "ASR_MODEL"),
        ("assistant_model", "ASSISTANT_MODEL"),
        ("diarization_model", "DIARIZATION_MODEL"),
    ):
        if getattr(args, flag):
            env[key] = getattr(args, flag)
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not ENV_NAME.match(key):
            raise UsageError(f"--env {item[:60]!r}: give KEY=VALUE")
        if key == "HF_TOKEN":
            raise UsageError("HF_TOKEN is a secret: it goes to the endpoint from --token / HF_TOKEN, not --env")
        env[key] = value
    kwargs: dict[str, Any] = {
        "name": args.name,
        "namespace": args.namespace,
        "accelerator": args.accelerator,
        "instance_type": args.instance_type,
        "instance_size": args.instance_size,
        "region": args.region,
        "vendor": args.vendor,
        "min_replica": args.min_replica,
        "max_replica": args.max_replica,
        "scale_to_zero_timeout": args.scale_to_zero_timeout if args.min_replica == 0 else None,
        "type": args.kind,
        "env": env,
    }
    if args.scaling_metric:
        kwargs["scaling_metric"] = args.scaling_metric
        kwargs["scaling_threshold"] = args.scaling_threshold
    if args.repository:
        kwargs.update(repository=args.repository, revision=args.revision, framework="pytorch", task="custom")
    else:
        # the image runs its own server: the repository field names where the models come from, for the record
        kwargs.update(
            repository=env.get("ASR_MODEL", "openai/whisper-large-v3"),
            framework="pytorch",
            task="custom",
            custom_image={"url": args.image, "health_route": "/health", "port": 80},
        )
    if token and not args.no_token_secret:
        kwargs["secrets"] = {"HF_TOKEN": token}
    return kwargs


def masked(kwargs: dict[str, Any]) -> dict[str, Any]:
    out = dict(kwargs)
    if "secrets" in out:
        out["secrets"] = {k: "***" for k in out["secrets"]}
    return out


PLACEHOLDER_NAMESPACE = "YOUR-NAMESPACE"


def planned_request(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The request ``huggingface_hub`` would send for ``kwargs`` - method, URL and JSON body - captured by an HTTP
    client that answers locally and sends nothing (secrets masked). For ``--dry-run``; the process ends after it,
    since huggingface_hub's client factory stays replaced."""
    import httpx2  # huggingface_hub's HTTP client
    from huggingface_hub import HfApi, set_client_factory

    captured: dict[str, Any] = {}

    def answer(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content or b"{}")
        captured.update(method=request.method, url=str(request.url), json=body)
        model = {"task": None, "revision": None, **body.get("model", {})}
        now = "1970-01-01T00:00:00Z"
        status = {"state": "pending", "createdAt": now, "updatedAt": now}
        return httpx2.Response(200, json={**body, "model": model, "status": status, "healthRoute": "/health"})

    set_client_factory(lambda: httpx2.Client(transport=httpx2.MockTransport(answer)))
    call = {**kwargs, "namespace": kwargs.get("namespace") or PLACEHOLDER_NAMESPACE}
    HfApi(token="hf_dry_run").create_inference_endpoint(**call)
    payload = captured.get("json", {})
    if "secrets" in payload.get("model", {}):
        payload["model"]["secrets"] = {k: "***" for k in payload["model"]["secrets"]}
    return captured


def wait_until_running(endpoint, timeout: float, poll: float, out=sys.stderr) -> bool:
    """Report each state change until the endpoint runs (True), fails or the time is up (False)."""
    t0 = time.monotonic()
    last = None
    while True:
        state = endpoint.status
        if state != last:
            out.write(f"[{time.monotonic() - t0:6.0f} s] {endpoint.name}: {state}\n")
            out.flush()
            last = state
        if state in FINAL_STATES:
            return state == "running"
        if time.monotonic() - t0 > timeout:
            out.write(f"still {state} after {timeout:g} s; see the endpoint's page for its logs\n")
            return False
        time.sleep(poll)
        endpoint.fetch()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    token = args.token or os.environ.get("HF_TOKEN") or None
    try:
        kwargs = endpoint_arguments(args, token)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.dry_run:
        plan = {"create_inference_endpoint": masked(kwargs), "request": planned_request(kwargs)}
        print(json.dumps(plan, indent=2, sort_keys=True))
        return 0
    if not token:
        print("error: no token: set HF_TOKEN or pass --token", file=sys.stderr)
        return 2
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import HfHubHTTPError

    api_url = args.api_url or os.environ.get("INFERENCE_ENDPOINTS_API")
    if api_url:
        # huggingface_hub has no setting for this address; its API calls read this module attribute
        constants.INFERENCE_ENDPOINTS_ENDPOINT = api_url.rstrip("/")
    api = HfApi(token=token)
    try:
        endpoint = api.create_inference_endpoint(**kwargs)
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        reason = {401: "the token was refused", 403: "not allowed", 402: "payment or quota refused"}.get(
            status, "the API refused the endpoint"
        )
        print(f"error: {reason} (HTTP {status}): {_server_message(exc)}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:  # offline mode, no connection, arguments huggingface_hub refuses
        print(f"error: could not create the endpoint: {type(exc).__name__}: {_server_message(exc)}", file=sys.stderr)
        return 1
    print(f"created {endpoint.namespace}/{endpoint.name}: {endpoint.status}", file=sys.stderr)
    if args.no_wait:
        return 0
    try:
        running = wait_until_running(endpoint, args.timeout, args.poll)
    except HfHubHTTPError as exc:
        print(f"error: could not read the endpoint's state: {_server_message(exc)}", file=sys.stderr)
        return 1
    if not running:
        return 1
    print(endpoint.url)
    print(
        f"try: curl {endpoint.url}/predict -H 'Authorization: Bearer $HF_TOKEN' -H 'Content-Type: audio/wav' "
        "--data-binary @meeting.wav",
        file=sys.stderr,
    )
    return 0


def _server_message(exc) -> str:
    response = getattr(exc, "response", None)
    try:
        body = response.json() if response is not None else None
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("error"):
        return str(body["error"])[:500]
    return str(exc).splitlines()[0][:500]


if __name__ == "__main__":
    raise SystemExit(main())
