"""The package's layers: every import inside ``speakerscribe`` points down (or stays in its own folder).

Bottom: what every stage shares (records, options, errors, ...). Then the stages, the merge, the pipeline, the models
that build it, the response and the handler; on top the front doors (live, serve, clients) and the shims that keep
former module paths working. Imports made inside functions count the same as those at the top of a file.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "speakerscribe"

# what every stage shares: one unit, whose modules may import each other
SHARED = frozenset({"records", "errors", "options", "runtime", "timing", "cancel", "intervals"})

# unit -> layer; a unit is a sub-package (folder), a module at the top of the package, or the shared bottom
LAYERS: dict[str, int] = {
    "shared": 0,
    "audio": 1,
    "asr": 2,
    "speakers": 2,
    "diarization": 3,
    "merge": 4,
    "pipeline": 5,
    "models": 6,
    "response": 7,
    "formats": 8,
    "endpoint": 9,
    "live": 10,
    "serve": 11,
    "clients": 11,
    # former module paths, kept as shims for `python -m` and for prepared model folders
    **dict.fromkeys(("server", "cli", "deploy", "campplus", "stream", "offline"), 12),
}


def unit_of(module: str) -> str:
    """``speakerscribe.asr.engine`` -> ``asr``; ``speakerscribe.pipeline`` -> ``pipeline``."""
    parts = module.split(".")
    assert parts[0] == "speakerscribe", module
    unit = parts[1] if len(parts) > 1 else ""
    return "shared" if unit in SHARED else unit


def module_of(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, absolute module) of every import of the package in ``source`` (``from . import x`` gives ``.x``)."""
    package = module if is_package else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "speakerscribe"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "speakerscribe":
                continue
            if target == "speakerscribe" or node.module is None:
                found += [(node.lineno, f"{target}.{a.name}") for a in node.names]
            else:
                found.append((node.lineno, target))
    return found


def violations(source: str, module: str, is_package: bool = False) -> list[str]:
    """Imports in ``source`` (the text of ``module``) that point to a higher layer or across to a sibling."""
    own = unit_of(module)
    out = []
    for line, target in imported_modules(source, module, is_package):
        other = unit_of(target)
        if other == own:
            continue
        if other not in LAYERS:
            out.append(f"{module}:{line} imports {target}, whose unit {other!r} has no layer")
        elif LAYERS[other] >= LAYERS[own]:
            out.append(f"{module}:{line} imports {target} (layer {LAYERS[other]}) from layer {LAYERS[own]}")
    return out


def package_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_unit_of_the_package_has_a_layer():
    units = {unit_of(module_of(p)) for p in package_files()} - {""}
    assert units - set(LAYERS) == set(), "place new folders or modules in LAYERS"
    assert set(LAYERS) - units == set(), "a layer names a unit that no longer exists"


@pytest.mark.parametrize("path", package_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path: Path):
    assert violations(path.read_text(), module_of(path), path.name == "__init__.py") == []


def test_the_check_catches_upward_and_sideways_imports():
    # a stage importing the pipeline, the bottom importing a stage (even inside a function), two sibling stages
    assert violations("from ..pipeline import Transcriber\n", "speakerscribe.asr.engine")
    assert violations("def f():\n    from .audio.vad import SileroVAD\n", "speakerscribe.records")
    assert violations("from ..diarization import diarizer\n", "speakerscribe.asr.engine")
    assert violations("from .. import pipeline\n", "speakerscribe.audio.vad")
    assert violations("from ..serve import app\n", "speakerscribe.live", is_package=True)
    # within a folder and downwards is fine
    assert not violations(
        "from .greedy import greedy_decode\nfrom ..records import Chunk\n", "speakerscribe.asr.engine"
    )
    assert not violations("from speakerscribe.audio.decode import decode_audio\n", "speakerscribe.clients.cli")
    assert not violations("from .errors import InputError\n", "speakerscribe.options")


MAX_FUNCTION_LINES = 60  # from `def` to its last line, docstring and decorators' arguments included


def long_functions(source: str) -> list[str]:
    """``name (lines)`` of every function or method in ``source`` longer than ``MAX_FUNCTION_LINES``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                out.append(f"{node.name} ({lines} lines)")
    return out


@pytest.mark.parametrize("path", package_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_function_in_the_runtime_package_is_over_60_lines(path: Path):
    assert long_functions(path.read_text()) == []


def test_the_length_check_counts_nested_functions_and_methods():
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    assert long_functions(f"def f():\n{body}") == [f"f ({MAX_FUNCTION_LINES + 1} lines)"]
    assert long_functions(f"class A:\n    def m(self):\n    {body.replace(chr(10) + '    ', chr(10) + '        ')}")
    assert long_functions(f"def f():\n{body[: -len(body.splitlines()[-1]) - 1]}") == []
