#!/usr/bin/env bash
# System packages the tests use beyond Python: Debian's headless Chromium, which the report test opens
# index.html in. Installs only when missing and when it can without a prompt (root, or passwordless
# sudo); otherwise says so and carries on (that test then skips with the reason).
set -uo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO=(sudo -n)
else
  echo "ci_deps: chromium missing and no root: the headless-browser report test will skip" >&2
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ci_deps: chromium missing and no apt-get: the headless-browser report test will skip" >&2
  exit 0
fi
echo "ci_deps: installing chromium (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q >/dev/null && "${SUDO[@]}" apt-get install -y -q --no-install-recommends chromium >/dev/null \
  || echo "ci_deps: apt-get install chromium failed: the headless-browser report test will skip" >&2
exit 0
