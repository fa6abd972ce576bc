#!/usr/bin/env bash
# System packages the tests use beyond Python: Debian's headless Chromium, which the report test opens
# index.html in; OpenSSH's server and rsync, which the loopback cluster test (tests/sweep/test_cluster_loopback.py)
# runs `ray up` over. Installs only what is missing and only when it can without a prompt (root, or
# passwordless sudo); otherwise says so and carries on (those tests then skip with the reason).
set -uo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || missing+=(chromium)
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v rsync >/dev/null 2>&1 || missing+=(rsync)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" = 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO=(sudo -n)
else
  echo "ci_deps: ${missing[*]} missing and no root: the tests that need them will skip" >&2
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ci_deps: ${missing[*]} missing and no apt-get: the tests that need them will skip" >&2
  exit 0
fi
echo "ci_deps: installing ${missing[*]} (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q >/dev/null && "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null \
  || echo "ci_deps: apt-get install ${missing[*]} failed: the tests that need them will skip" >&2
exit 0
