"""Another commit's code beside ours, for benchmarks that compare with it in the same run."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def baseline_tree(ref: str, into: Path) -> Path:
    """The repository's files at ``ref`` (``git archive``) extracted into ``into``; returns ``into``."""
    archive = subprocess.run(["git", "archive", ref], cwd=REPO, capture_output=True, check=True).stdout
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into
