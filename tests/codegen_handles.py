"""Kept so ``python tests/codegen_handles.py`` keeps working: the generator is ``tools/codegen.py``,
which writes ``agent_memory/handles.py`` and the blocking driver of ``agent_memory/db/requests.py``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

from codegen import generate, main  # noqa: E402

__all__ = ["generate", "main"]

if __name__ == "__main__":
    raise SystemExit(main())
