"""Data rights: export a user's memory as JSON, import it back, forget a user, delete a scope.

- :mod:`.format`: the export format (sections, columns, the checks an import makes) and the
  reports the ops answer.
- :mod:`.transfer`: :func:`export_data` and :func:`import_data`.
- :mod:`.authority`: whom an import's rows name, and the refusal of a file naming anyone the
  importing call may not act for (``user_id`` or ``as_operator=True``).
- :mod:`.erase`: :func:`forget_user` and :func:`delete_scope`.

Their SQL is built in :mod:`agent_memory.queries` (``transfer``, ``erase``), over the tables of
:data:`agent_memory.queries.USER_DATA_TABLES`.
"""

from .erase import delete_scope, forget_user
from .format import (
    FORGOTTEN_USER,
    FORMAT,
    GRAPH_SECTIONS,
    SECTIONS,
    VERSION,
    DeleteReport,
    ForgetReport,
    ImportReport,
    check_export,
)
from .transfer import export_data, export_queries, import_data

__all__ = [
    "FORGOTTEN_USER",
    "FORMAT",
    "GRAPH_SECTIONS",
    "SECTIONS",
    "VERSION",
    "DeleteReport",
    "ForgetReport",
    "ImportReport",
    "check_export",
    "delete_scope",
    "export_data",
    "export_queries",
    "forget_user",
    "import_data",
]
