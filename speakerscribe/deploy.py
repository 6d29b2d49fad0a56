"""Former path of the deploy command, kept for ``python -m speakerscribe.deploy``: it runs
:mod:`speakerscribe.clients.deploy`."""

from .clients.deploy import main

if __name__ == "__main__":
    raise SystemExit(main())
