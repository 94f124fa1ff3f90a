#!/usr/bin/env bash
# Installs headless Chromium and ChromeDriver from Debian's packages for the web-navigation tests
# (agentgym/WebShop-v0 drives the browser through Selenium 4). Idempotent; run as root, e.g. from
# .ci/run before the tests: `bash .ci/setup_chromium.sh`.
#
# The two binaries land at /usr/bin/chromium and /usr/bin/chromedriver, the defaults of
# sandboxes.web.browser.BrowserConfig; Selenium is given both paths, so selenium-manager never runs
# (nothing is downloaded at run time).
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
    echo "setup_chromium.sh must run as root (it calls apt-get install)" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends chromium chromium-driver

# Check that both binaries run, and that their major versions agree (ChromeDriver refuses a
# browser of another major version).
browser_version="$(chromium --version 2>/dev/null | grep -oE '[0-9]+\.[0-9.]+' | head -n1)"
driver_version="$(chromedriver --version | grep -oE '[0-9]+\.[0-9.]+' | head -n1)"
echo "chromium ${browser_version}, chromedriver ${driver_version}"
if [ "${browser_version%%.*}" != "${driver_version%%.*}" ]; then
    echo "chromium and chromedriver major versions differ: ${browser_version} vs ${driver_version}" >&2
    exit 1
fi
