"""Former path of the offline model preparation, kept for ``python -m speakerscribe.offline.prepare``: it runs
:mod:`speakerscribe.models.prepare`."""

from ..models.prepare import main

if __name__ == "__main__":
    raise SystemExit(main())
