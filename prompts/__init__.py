"""Prompt templates, one text file per purpose, and the one function that renders them.

Templates use ``$name`` placeholders (:class:`string.Template`), so braces and
JSON in prompt text need no escaping. A missing variable is an error, never a
silently empty hole in a prompt.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from string import Template

from agent_memory.errors import ConfigurationError

__all__ = ["load", "render", "template_names"]


def template_names() -> list[str]:
    """Names of the bundled templates (file names without ``.txt``)."""
    return sorted(
        p.name[: -len(".txt")] for p in resources.files(__package__).iterdir() if p.name.endswith(".txt")
    )


@cache
def load(name: str) -> Template:
    if name not in template_names():
        raise ConfigurationError(f"no prompt template {name!r}; available: {', '.join(template_names())}")
    return Template(resources.files(__package__).joinpath(f"{name}.txt").read_text(encoding="utf-8"))


def render(name: str, **values: object) -> str:
    """The template ``name`` with ``values`` substituted; every placeholder must be given."""
    template = load(name)
    try:
        return template.substitute({k: str(v) for k, v in values.items()})
    except KeyError as exc:
        raise ConfigurationError(f"prompt template {name!r} needs a value for ${exc.args[0]}") from None
    except ValueError as exc:
        raise ConfigurationError(f"prompt template {name!r} is malformed: {exc}") from None
