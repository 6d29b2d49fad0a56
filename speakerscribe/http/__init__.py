"""The HTTP front doors over one :class:`~speakerscribe.endpoint.EndpointHandler`.

* :mod:`.app` - the ASGI app: settings, admission (queue and slots), auth, body limits, the request life shared
  by every route, error mapping, health, metrics, graceful shutdown.
* :mod:`.endpoints` - the Inference Endpoints contract (``POST /``, ``/predict``).
* :mod:`.openai` - OpenAI's ``/v1/audio/transcriptions``.
* :mod:`.errors` - which failure is which status, and how each API shapes an error.

Every route is a module-level ``async def route(request) -> Response`` that reads the app's
:class:`~.app.ServerState` from ``request.app.state.server``; each API's parsing is a module-level function of the
body and headers, testable without a socket. ``python -m speakerscribe.server`` runs the app under uvicorn.
"""
