# Sourced by setup.sh and test-min-versions.sh: ensure_venv VENV CONSTRAINTS creates VENV (if missing) and installs
# requirements-dev.txt with CONSTRAINTS into it, again only when those three files change (a stamp in VENV).
ensure_venv() {
  local venv=$1 constraints=$2
  if [ ! -x "$venv/bin/python" ]; then
    echo "== creating $venv"
    "${PYTHON:-python3}" -m venv "$venv"
  fi
  local stamp
  stamp="$venv/.deps-$(cat requirements.txt requirements-dev.txt "$constraints" | sha256sum | cut -c1-16)"
  if [ ! -f "$stamp" ]; then
    echo "== installing dependencies into $venv with $constraints (first run: a few minutes)"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
    # No wheel cache: the CUDA wheels torch pulls are gigabytes that would lie on disk twice (cache and venv), and a
    # full disk is how this install once failed in CI. A dropped connection resumes (--resume-retries) and a failed
    # install is tried again, three times in all, before the set-up gives up.
    local attempt
    for attempt in 1 2 3; do
      if "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir --resume-retries 20 \
        -r requirements-dev.txt -c "$constraints" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
      then
        break
      fi
      if [ "$attempt" = 3 ]; then
        echo "installing into $venv failed three times; free disk: $(df -Pk . | awk 'NR==2 {print int($4 / 1024)}') MB" >&2
        return 1
      fi
      echo "installing into $venv failed (attempt $attempt of 3); trying again in 30 s" >&2
      sleep 30
    done
    rm -f "$venv"/.deps-*; touch "$stamp"
  fi
}
