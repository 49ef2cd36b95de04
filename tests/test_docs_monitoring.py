"""docs/monitoring.md: every python block runs as pasted from the repository root and prints what its comments say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "monitoring.md").read_text(encoding="utf-8")


def test_python_blocks_run_and_print_their_comments() -> None:
    """Catches a snippet that does not run as pasted, or a `# execute` / `# escalate` comment the snippet does not
    print (planted: `guard.trip` removed from the breaker snippet -> the second decision prints execute)."""
    blocks = re.findall(r"```python\n(.*?)```", PAGE, re.S)
    assert blocks
    for block in blocks:
        done = subprocess.run(
            [sys.executable, "-c", block], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, done.stderr[-2000:]
        expected = [m.group(1) for m in re.finditer(r"print\(.*\)\s+# (\w+)$", block, re.M)]
        assert done.stdout.split() == expected
