"""One family of reports: every operation that changes many rows answers with a ``Report`` that
says what happened to people (``summary()``) and to programs (``to_dict()``). No database."""

from __future__ import annotations

import json
import uuid

import pytest

import agent_memory
from agent_memory import (
    AddManyReport,
    DeleteReport,
    ExtractionReport,
    ForgetReport,
    ImportReport,
    Rejection,
    RejectionReason,
    Report,
)

MEMORY = uuid.uuid4()
REFUSED = Rejection(RejectionReason.SENSITIVE, "looks like it contains an API key")

REPORTS = [
    (AddManyReport(inserted=[MEMORY], rejected=[(1, REFUSED)], duplicates=[(2, MEMORY)]),
     ["1 added", "1 refused", "1 already known"]),
    (ImportReport(inserted={"memories": 3, "history": 0}, skipped={"scopes": 1}, rejected={"memories": [(4, REFUSED)]}),
     ["memories 3", "scopes 1", "refused: memories 1"]),
    (ForgetReport(user_id="bob", removed={"memories": 2, "threads": 1}, ownerless=[("project", "acme/web")],
                  changed={"memory_history.decided_by": 1}),
     ["'bob'", "memories 2", "threads 1", "project acme/web", "memory_history.decided_by 1"]),
    (DeleteReport(scope="project", scope_id="acme/web", removed={"memories": 0}), ["project 'acme/web'", "nothing"]),
    (ExtractionReport(status="rate_limited", extractor="rules", runs_left=0), ["rate_limited"]),
]


@pytest.mark.parametrize(("report", "says"), REPORTS, ids=[type(r).__name__ for r, _ in REPORTS])
def test_every_report_says_what_happened_to_people_and_programs(report, says):
    assert isinstance(report, Report)
    text = report.summary()
    assert str(report) == text
    for words in says:
        assert words in text, (words, text)
    data = report.to_dict()
    assert json.loads(json.dumps(data)) == data  # plain JSON values: ids as strings, enums as values
    if isinstance(report, AddManyReport):
        assert data["inserted"] == [str(MEMORY)]
        assert data["rejected"] == [[1, {"reason": "sensitive", "message": REFUSED.message, "kind": None}]]


def test_every_report_is_exported_and_returned_by_the_doors():
    for name in ("Report", "AddManyReport", "ExtractionReport", "ImportReport", "ForgetReport", "DeleteReport"):
        assert name in agent_memory.__all__
    from agent_memory.handles import MemoryHandle, ServiceMethods

    assert MemoryHandle.add_many.__annotations__["return"] == "AddManyReport"
    assert MemoryHandle.extract.__annotations__["return"] == "ExtractionReport"
    assert ServiceMethods.import_data.__annotations__["return"] == "ImportReport"
    assert ServiceMethods.forget_user.__annotations__["return"] == "ForgetReport"
    assert ServiceMethods.delete_scope.__annotations__["return"] == "DeleteReport"
