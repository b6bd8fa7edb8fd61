#!/usr/bin/env bash
# Installs what the product and its tests need on a Debian machine, idempotently:
# system packages (Java 17, ZooKeeper, Prometheus, Alertmanager, Chromium, openssl) when missing, then a
# virtualenv in .venv with the pinned Python packages and the project installed editable (pip install -e .). As non-root it installs
# nothing system-wide and prints the exact apt-get line instead.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[setup] %s\n' "$*" >&2; }

missing=()
command -v python3 >/dev/null 2>&1 || missing+=(python3)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
if ! command -v java >/dev/null 2>&1 \
   || ! java -version 2>&1 | grep -Eq 'version "(1[7-9]|2[0-9])'; then
  missing+=(openjdk-17-jre-headless)
fi
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
{ command -v prometheus && command -v promtool; } >/dev/null 2>&1 || missing+=(prometheus)
# amtool checks deploy/alertmanager/alertmanager.yml; the Alertmanager itself runs in tests/unit/test_alertmanager.py
{ command -v prometheus-alertmanager && command -v amtool; } >/dev/null 2>&1 || missing+=(prometheus-alertmanager)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
# the sandbox makes a throwaway CA and server certificate with the openssl CLI for its TLS listeners
command -v openssl >/dev/null 2>&1 || missing+=(openssl)

if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    say "installing system packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 || { say "apt-get update failed"; exit 3; }
    if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2; then
      say "could not install: ${missing[*]}"
      exit 3
    fi
  else
    say "missing system packages: ${missing[*]}"
    say "install them with:  sudo apt-get install -y ${missing[*]}"
    exit 3
  fi
fi

python3 - <<'PY' || { say "Python 3.11 or newer is required"; exit 3; }
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY

stamp=.venv/.requirements.sha256
want=$(cat requirements.txt requirements-dev.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "creating virtualenv .venv and installing pinned Python packages (a few minutes the first time)"
  python3 -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip >&2
  .venv/bin/python -m pip install -q -r requirements.txt -r requirements-dev.txt >&2
  # the project itself, editable: `import collectors` works from any directory, no page or script edits sys.path
  .venv/bin/python -m pip install -q --no-deps -e . >&2
  echo "$want" > "$stamp"
fi
say "ready"
