# speakerscribe's own image: the HTTP server (Endpoints contract + OpenAI API) on port 80, as a non-root user.
#
#   docker build -t speakerscribe .        (podman: add --format docker, or SHELL and HEALTHCHECK are dropped)
#   docker run --gpus all -p 8080:80 -e ASR_MODEL=openai/whisper-large-v3 \
#     -e DIARIZATION_MODEL=pyannote/speaker-diarization-community-1 -e HF_TOKEN speakerscribe
#
# Models named by ASR_MODEL / ASSISTANT_MODEL / DIARIZATION_MODEL are downloaded when the server starts (HF_TOKEN for
# gated ones), or baked in at build time: --build-arg BAKE_MODELS=true plus the same three names as build arguments,
# with the token as a build secret (--secret id=hf_token,env=HF_TOKEN), never as an argument.
ARG BASE_IMAGE=pytorch/pytorch:2.9.1-cuda12.8-cudnn9-runtime
FROM ${BASE_IMAGE}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# ffmpeg's libraries for torchcodec (pyannote.audio imports it); libcap2-bin to let the server bind port 80 unprivileged
RUN apt-get update \
    && apt-get install -y --no-install-recommends ffmpeg libcap2-bin \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
# the base image's torch satisfies requirements.txt's range, so it is kept; the constraints pin what must match it
# (CONSTRAINTS=constraints-ci.txt: CI's versions, for a base without torch)
ARG CONSTRAINTS=constraints-image.txt
COPY requirements.txt ${CONSTRAINTS} ./
RUN pip install --no-cache-dir -r requirements.txt -c "${CONSTRAINTS}" \
    && setcap cap_net_bind_service=+ep "$(readlink -f "$(command -v python)")"

COPY handler.py config.py diarization_utils.py ./
COPY speakerscribe ./speakerscribe

RUN useradd --create-home --uid 1000 speakerscribe && mkdir -p /data && chown speakerscribe /data
USER 1000

ENV HOST=0.0.0.0 \
    PORT=80 \
    HF_HOME=/data/huggingface \
    PYANNOTE_METRICS_ENABLED=false \
    PYTHONUNBUFFERED=1

ARG BAKE_MODELS=false
ARG ASR_MODEL=""
ARG ASSISTANT_MODEL=""
ARG DIARIZATION_MODEL=""
RUN --mount=type=secret,id=hf_token,uid=1000 \
    if [ "${BAKE_MODELS}" = "true" ]; then \
      HF_TOKEN="$(cat /run/secrets/hf_token 2>/dev/null || true)" DEVICE=cpu python -m speakerscribe.models.loading; \
    fi
ENV ASR_MODEL=${ASR_MODEL} \
    ASSISTANT_MODEL=${ASSISTANT_MODEL} \
    DIARIZATION_MODEL=${DIARIZATION_MODEL}

EXPOSE 80
HEALTHCHECK --interval=30s --timeout=5s --start-period=600s \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ['PORT'], timeout=4)"]
CMD ["python", "-m", "speakerscribe.server"]
