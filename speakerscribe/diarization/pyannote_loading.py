"""Load a pyannote.audio pipeline (Hub id, folder or ``config.yaml``) with its PLDA resolved here.

pyannote.audio 4's ``SpeakerDiarization`` loads a PLDA whatever its clustering, and when the config names none it
fetches its default, ``pyannote/speaker-diarization-community-1``'s. Only VBx clustering uses one. So:

* a pipeline whose clustering never uses a PLDA (``AgglomerativeClustering``: pyannote/speaker-diarization-3.1,
  our offline folder) gets :class:`UnusedPLDA` and loads from its own files and the models its config names, with
  no token for, or cached copy of, another repository;
* a pipeline that clusters with VBx (community-1) gets the PLDA its config names (else pyannote's default), fetched
  here first, so a missing file is a :class:`~speakerscribe.errors.ModelLoadError` naming the file, the
  repository it comes from and what the token must reach.

Other pipeline classes load with pyannote's ``Pipeline.from_pretrained`` as they are. This module imports
pyannote.audio: import it after :func:`speakerscribe.runtime.configure_pyannote_environment`.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import yaml
from pyannote.audio import Pipeline
from pyannote.audio.core.plda import PLDA
from pyannote.audio.pipelines import SpeakerDiarization
from pyannote.core.utils.helper import get_class_by_name

from ..errors import ModelLoadError, short_message

PLDA_FILES = ("xvec_transform.npz", "plda.npz")


class UnusedPLDA(PLDA):
    """The PLDA given to a pipeline whose clustering never uses one; using it is a bug, so it raises."""

    def __init__(self):  # no files: nothing here is ever read
        self.lda_dimension = 0

    def __call__(self, embeddings):
        raise RuntimeError("this pipeline's clustering does not use a PLDA; speakerscribe gave it none")

    @property
    def phi(self):
        raise RuntimeError("this pipeline's clustering does not use a PLDA; speakerscribe gave it none")


def load_pipeline(model_id: str, token: str | None = None):
    """The pyannote pipeline ``model_id`` names (see the module docstring)."""
    config, origin = read_config(model_id, token)
    if not _is_speaker_diarization(config):
        return Pipeline.from_pretrained(model_id, token=token)
    expand_model_paths(config, origin, token)
    params = config["pipeline"].setdefault("params", {})
    params["plda"] = resolve_plda(params.get("plda"), clustering_of(params), model_id, token)
    return Pipeline.from_pretrained(config, token=token)


def read_config(model_id: str, token: str | None) -> tuple[dict[str, Any], str | Path]:
    """(the pipeline's config, what its ``$model/...`` entries are relative to: a folder or a Hub id)."""
    path = Path(model_id)
    if path.is_dir():
        config_file, origin = path / "config.yaml", path
    elif path.is_file():
        config_file, origin = path, path.parent
    else:
        from huggingface_hub import hf_hub_download

        config_file, origin = Path(hf_hub_download(model_id, "config.yaml", token=token)), model_id
    config = yaml.safe_load(Path(config_file).read_text())
    if not isinstance(config, dict) or not isinstance(config.get("pipeline"), dict):
        raise ModelLoadError(f"DIARIZATION_MODEL {model_id!r}: {config_file} is not a pyannote pipeline config")
    return config, origin


def _is_speaker_diarization(config: dict[str, Any]) -> bool:
    name = config["pipeline"].get("name")
    try:
        cls = get_class_by_name(name, default_module_name="pyannote.pipeline.blocks")
    except Exception:  # pyannote's own loader reports an unknown class
        return False
    return isinstance(cls, type) and issubclass(cls, SpeakerDiarization)


def expand_model_paths(node, origin: str | Path, token: str | None) -> None:
    """``$model/sub[@revision]`` entries -> what pyannote's loaders take for a file inside the pipeline's own
    repository or folder (as ``Pipeline.from_pretrained`` does for a config it reads itself)."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in list(items):
        if isinstance(value, str) and value.startswith("$model/"):
            subfolder, _, revision = value[len("$model/") :].partition("@")
            node[key] = {"checkpoint": str(origin), "subfolder": subfolder, "revision": revision or None}
            if not isinstance(origin, Path):
                node[key]["token"] = token
        else:
            expand_model_paths(value, origin, token)


def clustering_of(params: dict[str, Any]) -> str:
    default = inspect.signature(SpeakerDiarization).parameters["clustering"].default
    return str(params.get("clustering", default))


def resolve_plda(spec, clustering: str, model_id: str, token: str | None) -> PLDA:
    """The PLDA to hand pyannote: :class:`UnusedPLDA` unless ``clustering`` is VBx; else the one ``spec`` (the
    config's ``plda`` entry, else pyannote's default) names, loaded here."""
    if clustering != "VBxClustering":
        return UnusedPLDA()
    if isinstance(spec, PLDA):
        return spec
    if spec is None:
        spec = inspect.signature(SpeakerDiarization).parameters["plda"].default
    spec = {"checkpoint": spec} if isinstance(spec, str) else dict(spec)
    paths = [plda_file(spec, name, model_id, token) for name in PLDA_FILES]
    return PLDA(*paths)


def plda_file(spec: dict[str, Any], name: str, model_id: str, token: str | None) -> str:
    """The local path of one PLDA file, downloaded (or found in the Hugging Face cache) when it is on the Hub."""
    checkpoint, subfolder = str(spec["checkpoint"]), spec.get("subfolder") or ""
    where = f"{subfolder}/{name}" if subfolder else name
    needs = f"DIARIZATION_MODEL {model_id!r} clusters with VBx, which needs a PLDA"
    if Path(checkpoint).is_dir():
        path = Path(checkpoint, subfolder, name)
        if not path.is_file():
            raise ModelLoadError(f"{needs}: {where} is missing from the folder {checkpoint}")
        return str(path)
    from huggingface_hub import hf_hub_download

    try:
        return hf_hub_download(
            checkpoint, name, subfolder=subfolder or None, revision=spec.get("revision"), token=spec.get("token", token)
        )
    except Exception as exc:
        other = "" if checkpoint == model_id else f" (a token for {model_id} alone is not enough)"
        raise ModelLoadError(
            f"{needs}: could not get {where} from the Hugging Face repository {checkpoint} "
            f"({short_message(exc, 200)}). "
            f"HF_TOKEN must reach {checkpoint}{other}: accept its conditions at https://hf.co/{checkpoint} with the "
            "account the token belongs to"
        ) from exc
