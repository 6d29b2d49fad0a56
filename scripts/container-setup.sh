#!/usr/bin/env bash
# Idempotent set-up for building and running the Dockerfile here (tests/test_image.py): podman and runc from Debian,
# a containers.conf that works on these machines, and a local base image (no image registry is reachable here, so
# the Dockerfile's CUDA PyTorch base cannot be pulled). Prints the base image's name on its last line.
#
#   CONTAINERS_CONF=scripts/containers.conf podman build --network host \
#       --build-arg BASE_IMAGE="$(bash scripts/container-setup.sh | tail -1)" --build-arg CONSTRAINTS=constraints-ci.txt .
#
# The base: Debian bookworm (python3.11, as the host's venv) from Debian's packages with mmdebstrap, plus a venv at
# /opt/python on PATH, so that `python` and `pip` are what the PyTorch image gives the Dockerfile. It is made once:
# its tag names a hash of this script, and a later run finds it.
set -euo pipefail
SELF=$(readlink -f "$0")
cd "$(dirname "$SELF")/.."
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/scripts/containers.conf}

if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1 || ! command -v mmdebstrap >/dev/null 2>&1 \
  || ! command -v newuidmap >/dev/null 2>&1; then
  echo "== installing podman, runc, mmdebstrap, uidmap (building and running the image in the tests)" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"
  $SUDO apt-get update -qq || true
  $SUDO apt-get install -y -qq --no-install-recommends podman runc mmdebstrap uidmap >/dev/null
fi

BASE="localhost/speakerscribe-base:$(sha256sum "$SELF" | cut -c1-12)"
if ! podman image exists "$BASE"; then
  echo "== making the base image $BASE (Debian bookworm, about a minute)" >&2
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$work/rootfs.tar" >&2
  podman import "$work/rootfs.tar" localhost/speakerscribe-rootfs >/dev/null
  printf '%s\n' 'FROM localhost/speakerscribe-rootfs' \
    'RUN python3 -m venv /opt/python' \
    'ENV PATH=/opt/python/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    'CMD ["python"]' >"$work/Containerfile"
  podman build --quiet --network host -t "$BASE" -f "$work/Containerfile" "$work" >&2
  podman rmi localhost/speakerscribe-rootfs >/dev/null
fi
echo "$BASE"
