"""Former path of the live client, kept for ``python -m speakerscribe.stream``."""

from ..clients.stream import main

raise SystemExit(main())
