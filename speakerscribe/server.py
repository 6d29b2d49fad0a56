"""Former path of the server command, kept for ``python -m speakerscribe.server``: it runs
:mod:`speakerscribe.serve.command`."""

from .serve.command import main

if __name__ == "__main__":
    raise SystemExit(main())
