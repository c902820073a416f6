#!/usr/bin/env bash
# Chromium and its WebDriver (chromedriver) from the system packages, for tests/test_browser.py; nothing to do when
# both are on PATH. Debian/Ubuntu (apt-get), as root or with sudo. Where it cannot install them it says so and the
# browser tests are skipped, except under CI=true, where this fails (and so would the tests).
set -uo pipefail
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
  exit 0
fi
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo -n"
if $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium chromium-driver \
  >/dev/null; then
  chromium --version
  exit 0
fi
echo "install_browser: could not install chromium and chromium-driver; the browser tests will be skipped" >&2
[ "${CI:-}" = "true" ] && exit 1
exit 0
