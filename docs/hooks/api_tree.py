"""mkdocs hooks: show mkdocstrings the package as it is installed, and its Sphinx roles as code.

``middleware/`` and ``prompts/`` live at the top of the repository but install as
``agent_memory.middleware`` and ``agent_memory.prompts`` (setuptools ``package-dir``). Static
analysis can't see that mapping, so the handler reads a temporary copy of the sources laid out
like the installed package (copies, not symlinks: griffe resolves a symlink to where it points).
"""

from __future__ import annotations

import atexit
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[2]


def package_tree() -> Path:
    """A temporary directory holding ``agent_memory/`` as installed; removed at exit."""
    top = Path(tempfile.mkdtemp(prefix="agent-memory-api-"))
    atexit.register(shutil.rmtree, top, ignore_errors=True)
    skip = shutil.ignore_patterns("__pycache__")
    package = top / "agent_memory"
    shutil.copytree(ROOT / "agent_memory", package, ignore=skip)
    shutil.copytree(ROOT / "middleware", package / "middleware", ignore=skip)
    shutil.copytree(ROOT / "prompts", package / "prompts", ignore=skip)
    return top


@event_priority(100)  # before mkdocstrings makes its handlers
def on_config(config: Any) -> Any:
    handlers = config.plugins["mkdocstrings"].config.handlers
    handlers.setdefault("python", {})["paths"] = [str(package_tree())]
    return config


_ROLE = re.compile(r":(?:class|meth|func|mod|data|attr|exc|obj|const):(<code>)(~?)([\w.]+)(</code>)")


def _role(match: re.Match[str]) -> str:
    target = match.group(3)
    if match.group(2):  # ``~a.b.C`` shows as ``C``, as Sphinx shows it
        target = target.rsplit(".", 1)[-1]
    return f"{match.group(1)}{target}{match.group(4)}"


def on_page_content(html: str, **kwargs: Any) -> str:
    """The docstrings are written for Sphinx: show ``:class:`~a.b.C``` as the code ``C``."""
    return _ROLE.sub(_role, html)
