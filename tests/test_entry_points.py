"""The public module paths keep working after the package was regrouped: the ``python -m`` commands the README
gives, and the class path that diarization folders prepared earlier name for CAM++."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

COMMANDS = {
    # former path -> the module that now holds it (its parser names the command by the former, public path)
    "speakerscribe.server": "speakerscribe.serve.command",
    "speakerscribe.cli": "speakerscribe.clients.cli",
    "speakerscribe.deploy": "speakerscribe.clients.deploy",
    "speakerscribe.stream": "speakerscribe.clients.stream",
    "speakerscribe.offline.prepare": "speakerscribe.models.prepare",
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_python_dash_m_commands_answer_help(command: str):
    proc = subprocess.run(
        [sys.executable, "-m", command, "--help"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage:" in proc.stdout


# a usage error each command reports with exit status 2 (argparse's, or the command's own): the status must come
# through the former path unchanged, not only the help text
USAGE_ERRORS = {
    "speakerscribe.server": ["--port", "not-a-port"],
    "speakerscribe.cli": ["no-such-file.wav"],
    "speakerscribe.deploy": ["--name", "x"],
    "speakerscribe.stream": ["no-such-file.wav"],
    "speakerscribe.offline.prepare": ["--no-such-flag"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_former_paths_pass_on_the_exit_status(command: str):
    env = {k: v for k, v in os.environ.items() if k != "HF_TOKEN"}
    proc = subprocess.run(
        [sys.executable, "-m", command, *USAGE_ERRORS[command]],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "error" in proc.stderr.lower()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_former_path_runs_the_same_main_as_its_new_home(command: str):
    if command == "speakerscribe.stream":  # a package: its __main__ runs the client's main
        text = (REPO / "speakerscribe" / "stream" / "__main__.py").read_text()
        assert "clients.stream import main" in text
        return
    assert importlib.import_module(command).main is importlib.import_module(COMMANDS[command]).main


def test_cam_plus_plus_loads_from_the_class_path_that_earlier_folders_name():
    # pyannote imports a checkpoint's model class from the dotted path stored in it
    from speakerscribe.diarization.campplus import CAMPPlusEmbedding

    assert importlib.import_module("speakerscribe.campplus").CAMPPlusEmbedding is CAMPPlusEmbedding
