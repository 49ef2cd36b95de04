"""How this project starts headless Chromium (Debian's ``chromium``) to look at reports.

The flags keep a closed-network machine quiet: no background networking, no component updates,
no first-run; ``--no-sandbox`` because CI runs as root.  Pass a fresh ``--user-data-dir`` per run.
"""

from __future__ import annotations

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS: tuple[str, ...] = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
)
