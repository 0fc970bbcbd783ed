"""What tests, notebooks and your own agents' tests use: a scripted chat model and its helpers.

:class:`ScriptedChatModel` answers with a function of the messages it is sent
(or from a list), records every request and binds tools by ignoring them; see
:mod:`agent_memory.scripted`, where it lives so that the offline demo can run on
it without production code importing this module.
"""

from __future__ import annotations

from .scripted import ScriptedChatModel, structured_reply, tool_call

__all__ = ["ScriptedChatModel", "structured_reply", "tool_call"]
