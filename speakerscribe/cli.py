"""Former path of the command line, kept for ``python -m speakerscribe.cli``: it runs
:mod:`speakerscribe.clients.cli`."""

from .clients.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
