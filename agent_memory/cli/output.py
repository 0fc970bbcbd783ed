"""What the command line prints: JSON (``--json``), tables with colour on a terminal (rich),
plain aligned text when piped, and a progress bar on a terminal only.

``rich`` is imported only when a terminal is there to draw on, so a pipe or a test never pays
for it and never sees escape codes. ``NO_COLOR`` is honoured by rich itself.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

from ..reports import jsonable

__all__ = ["Output", "jsonable", "short_id"]

#: how many characters of a memory id tables show; any unambiguous prefix is accepted back
SHORT_ID = 8


def short_id(value: Any) -> str:
    return str(value)[:SHORT_ID]


def _plain_table(headers: Sequence[str], rows: Sequence[Sequence[str]], out: TextIO) -> None:
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row)]
    for row in (headers, *rows):
        cells = [c.ljust(w) for c, w in zip(row[:-1], widths)] + [row[-1]]
        print("  ".join(cells).rstrip(), file=out)


class Output:
    """One command's output: ``json`` prints machine-readable JSON only; otherwise tables and
    messages for people, drawn with rich when ``out`` is a terminal."""

    def __init__(self, *, json_mode: bool = False, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.json = json_mode
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._console: Any = None

    @property
    def terminal(self) -> bool:
        return bool(getattr(self.out, "isatty", lambda: False)())

    def console(self, stderr: bool = False) -> Any:
        from rich.console import Console

        if stderr:
            return Console(file=self.err, highlight=False)
        if self._console is None:
            self._console = Console(file=self.out, highlight=False)
        return self._console

    def data(self, value: Any) -> None:
        """Print ``value`` as JSON (one line)."""
        print(json.dumps(jsonable(value), ensure_ascii=False), file=self.out)

    def line(self, text: str = "", style: str | None = None) -> None:
        """A message for people (nothing in JSON mode: JSON output is the data alone)."""
        if self.json:
            return
        if self.terminal and style:
            from rich.text import Text

            self.console().print(Text(text, style=style))
        else:
            print(text, file=self.out)

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str | None = None,
              empty: str = "nothing to show") -> None:
        cells = [[("" if c is None else str(c)) for c in row] for row in rows]
        if not cells:
            self.line(empty, "dim")
            return
        if not self.terminal:
            if title:
                print(title, file=self.out)
            _plain_table(headers, cells, self.out)
            return
        from rich.table import Table

        table = Table(title=title, header_style="bold cyan", title_justify="left")
        for i, header in enumerate(headers):
            table.add_column(header, style="dim" if i == 0 else None, overflow="fold",
                             ratio=3 if i == len(headers) - 1 else None)
        for row in cells:
            table.add_row(*row)
        self.console().print(table)

    def fields(self, pairs: Sequence[tuple[str, Any]], *, title: str | None = None) -> None:
        """Name/value pairs, one per line."""
        self.table(("field", "value"), [(k, v) for k, v in pairs], title=title, empty="(empty)")

    @contextmanager
    def progress(self, description: str, total: int | None = None) -> Iterator[Callable[[int, int], None]]:
        """A function ``update(done, total)``, drawing a progress bar on a terminal (stderr)."""
        if not getattr(self.err, "isatty", lambda: False)():
            yield lambda done, total: None
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                      console=self.console(stderr=True), transient=False) as bar:
            task = bar.add_task(description, total=total)

            def update(done: int, all_: int) -> None:
                bar.update(task, completed=done, total=all_)

            yield update
