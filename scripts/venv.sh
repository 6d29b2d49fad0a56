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
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r requirements-dev.txt -c "$constraints" \
      2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
    rm -f "$venv"/.deps-*; touch "$stamp"
  fi
}
