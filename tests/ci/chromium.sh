#!/usr/bin/env bash
# Install Debian's headless Chromium and its WebDriver when they are absent: what the browser tests
# (tests/test_html_browser.py) drive through Selenium. Idempotent; needs root.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  echo "chromium: $(chromium --version 2>/dev/null | head -1), $(chromedriver --version | head -1)"
  exit 0
fi
echo "chromium: installing chromium and chromium-driver"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-dejavu-core >/dev/null
echo "chromium: $(chromium --version 2>/dev/null | head -1), $(chromedriver --version | head -1)"
