"""A local stand-in for the Hugging Face Hub's whoami route and the Inference Endpoints API, enough for
``speakerscribe.clients.deploy`` and ``huggingface_hub``'s endpoint calls: it records every request, refuses a wrong
token
(401), refuses endpoints past a quota (the instance type named in ``over_quota``: 402), and reports a created
endpoint as pending, then initializing, then running on the following reads.

    app, state = create_app(token="hf_test", namespace="alice")
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ApiState:
    token: str
    namespace: str
    over_quota: set[str] = field(default_factory=set)
    requests: list[dict[str, Any]] = field(default_factory=list)
    endpoints: dict[str, dict[str, Any]] = field(default_factory=dict)
    reads: dict[str, int] = field(default_factory=dict)
    base_url: str = "http://127.0.0.1"


STATES = ("pending", "initializing", "running")


def create_app(token: str, namespace: str, over_quota: tuple[str, ...] = ()):
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    state = ApiState(token=token, namespace=namespace, over_quota=set(over_quota))

    def authorised(request) -> bool:
        return request.headers.get("authorization", "") == f"Bearer {state.token}"

    def refused() -> JSONResponse:
        return JSONResponse({"error": "Invalid credentials in Authorization header"}, status_code=401)

    async def record(request) -> dict[str, Any]:
        body = await request.body()
        entry = {
            "method": request.method,
            "path": request.url.path,
            "authorization": request.headers.get("authorization", ""),
            "json": (await request.json()) if body else None,
        }
        state.requests.append(entry)
        return entry

    async def whoami(request):
        await record(request)
        if not authorised(request):
            return refused()
        return JSONResponse({"type": "user", "name": state.namespace, "orgs": [], "auth": {"type": "access_token"}})

    def view(name: str) -> dict[str, Any]:
        raw = state.endpoints[name]
        reads = state.reads.get(name, 0)
        phase = STATES[min(reads, len(STATES) - 1)]
        status = {"state": phase, "createdAt": "2026-11-30T00:00:00Z", "updatedAt": "2026-11-30T00:00:00Z"}
        if phase == "running":
            status["url"] = f"{state.base_url}/endpoints/{name}"
        return {**raw, "status": status}

    async def create(request):
        entry = await record(request)
        if not authorised(request):
            return refused()
        payload = entry["json"] or {}
        kind = payload.get("compute", {}).get("instanceType")
        if kind in state.over_quota:
            return JSONResponse(
                {"error": f"Quota exceeded: no more {kind} instances for {request.path_params['namespace']}"},
                status_code=402,
            )
        name = payload.get("name")
        if name in state.endpoints:
            return JSONResponse({"error": f"An endpoint named {name} already exists"}, status_code=409)
        model = {"task": None, "revision": None, **payload.get("model", {})}
        state.endpoints[name] = {**payload, "model": model, "healthRoute": "/health"}
        state.reads[name] = 0
        return JSONResponse(view(name))

    async def read(request):
        await record(request)
        if not authorised(request):
            return refused()
        name = request.path_params["name"]
        if name not in state.endpoints:
            return JSONResponse({"error": "not found"}, status_code=404)
        state.reads[name] += 1
        return JSONResponse(view(name))

    routes = [
        Route("/api/whoami-v2", whoami, methods=["GET"]),
        Route("/v2/endpoint/{namespace}", create, methods=["POST"]),
        Route("/v2/endpoint/{namespace}/{name}", read, methods=["GET"]),
    ]
    return Starlette(routes=routes), state
