#!/usr/bin/env bash
# Installs every Debian package that mcpwarden's build, tests and benchmarks need, and the
# npm test peers from the committed lockfile. Idempotent: apt-get runs only when something
# is missing, and `apt-get update` only then. Nothing is fetched from anywhere else.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libcli11-dev libfmt-dev libsimdjson-dev nlohmann-json3-dev
  libsqlite3-dev libssl-dev libtomlplusplus-dev libsystemd-dev libseccomp-dev
  libgtest-dev libgmock-dev libbenchmark-dev libre2-dev
  libcurl4-openssl-dev zlib1g-dev openssl rsyslog rsyslog-gnutls faketime
  clang libclang-rt-14-dev
  procps lsof socat iproute2 strace python3 pipx man-db zsh fish
  lintian librsvg2-bin zlib1g-dev
  nodejs npm
)

missing=()
for p in "${packages[@]}"; do
  # nodejs/npm may come from outside apt (the machine image); a working binary counts.
  case "$p" in
    nodejs) command -v node >/dev/null 2>&1 && continue ;;
    npm) command -v npm >/dev/null 2>&1 && continue ;;
  esac
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y --no-install-recommends "${missing[@]}"
fi

# An unprivileged user for the tests that play a hostile local user (tests/reap/trust_test.cpp:
# another user's process planting root's MCPWARDEN_SESSION). Created once, only as root.
if [ "$(id -u)" = 0 ] && ! id mcpwarden-test >/dev/null 2>&1; then
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin mcpwarden-test
fi

here=$(cd "$(dirname "$0")/.." && pwd)
if command -v npm >/dev/null 2>&1 && [ -f "$here/tests/e2e/package-lock.json" ]; then
  if [ ! -d "$here/tests/e2e/node_modules" ] || \
     [ "$here/tests/e2e/package-lock.json" -nt "$here/tests/e2e/node_modules/.package-lock.json" ]; then
    (cd "$here/tests/e2e" && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi
# The OTLP receiver of the export tests (tests/otlp-receiver: the OpenTelemetry project's
# generated OTLP decoder), from its own committed lockfile.
if command -v npm >/dev/null 2>&1 && [ -f "$here/tests/otlp-receiver/package-lock.json" ]; then
  if [ ! -d "$here/tests/otlp-receiver/node_modules" ] || \
     [ "$here/tests/otlp-receiver/package-lock.json" -nt "$here/tests/otlp-receiver/node_modules/.package-lock.json" ]; then
    (cd "$here/tests/otlp-receiver" && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi
