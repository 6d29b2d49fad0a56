"""The HTTP service (a front door) over one :class:`~speakerscribe.endpoint.EndpointHandler`.

* :mod:`.service` - the server's settings and shared state (admission: queue and slots; auth; body limits) and
  the request life every route shares (read, check, queue, run, map errors, log, metrics).
* :mod:`.endpoints` - the Inference Endpoints contract (``POST /``, ``/predict``).
* :mod:`.openai` - OpenAI's ``/v1/audio/transcriptions``.
* :mod:`.errors` - which failure is which status, and how each API shapes an error.
* :mod:`.app` - the route table, health and metrics, start-up (models load in a thread) and graceful shutdown.

Every route is a module-level ``async def route(request) -> Response`` that reads the app's
:class:`~.service.ServerState` from ``request.app.state.server``; each API's parsing is a module-level function of the
body and headers, testable without a socket. :mod:`.command` (``python -m speakerscribe.server``) runs the app
under uvicorn; :mod:`.admission` (slots and queue) and :mod:`.metrics` (Prometheus) serve every route; :mod:`.realtime`,
:mod:`.ws` and :mod:`.streaming` are the live routes over :mod:`speakerscribe.live`; :mod:`.ui` serves the page in
``page/``.

A front door: imports :mod:`speakerscribe.live`, the handler and everything below; nothing imports it.
"""
