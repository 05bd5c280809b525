#!/bin/sh
# Installs what the browser tests (tests/browser/) need: Debian's Chromium at /usr/bin/chromium.
# Idempotent and quiet: does nothing when the browser is already there. Never downloads a
# browser of its own (Playwright drives this one through executable_path).
set -eu

[ -x /usr/bin/chromium ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
else
    echo "install-test-browser: /usr/bin/chromium is missing and this user cannot run apt-get (not root, no sudo)" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
# apt's chatter goes to a log that is shown only when the install fails.
if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends chromium; } >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "install-test-browser: apt-get install chromium failed" >&2
    exit 1
fi
rm -f "$log"
[ -x /usr/bin/chromium ] || { echo "install-test-browser: apt-get ran but /usr/bin/chromium is still missing" >&2; exit 1; }
