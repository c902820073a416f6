#!/usr/bin/env bash
# Chromium and its WebDriver (chromedriver) from the system packages, for tests/test_browser.py; nothing to do when
# both are on PATH. Debian/Ubuntu (apt-get), as root or with sudo. Where it cannot install them it says so and the
# browser tests are skipped, except under CI=true, where this fails (and so would the tests). Quiet when it works:
# apt's output (and debconf's) is printed only when the install fails.
set -uo pipefail
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
  exit 0
fi
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo -n"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium \
  chromium-driver; } >"$log" 2>&1; then
  # Debian's chromium launcher is a shell script whose own checks print "[: ...: unexpected operator" on stderr
  echo "install_browser: $(chromium --version 2>/dev/null || echo chromium) and chromedriver installed"
  exit 0
fi
cat "$log" >&2
echo "install_browser: could not install chromium and chromium-driver; the browser tests will be skipped" >&2
[ "${CI:-}" = "true" ] && exit 1
exit 0
