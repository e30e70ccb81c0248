"""Where the hardening suites leave their figures: `tests/hardening/results/<name>.json` (git-ignored)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def write_results(name: str, figures: dict[str, Any]) -> Path:
    """Write `figures` as `results/<name>.json` and return the path."""
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(figures, indent=2, sort_keys=True, default=str) + "\n")
    return path
