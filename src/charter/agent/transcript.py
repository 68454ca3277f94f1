"""``llm_transcript_dir``: an auditable JSONL sidecar of every model turn.

Event kinds (the ``type`` field), as seed 001 names them:

- ``message``: one prompt-visible message, written once, the first time a request
  carries it (``index`` is its position in the prompt). Replaying the ``message``
  events of a session gives exactly what the model saw.
- ``request``: a full snapshot of the prompt (``messages`` plus model, provider and tool
  names), written only when the visible history was rewritten (a context callback or a
  compaction dropped or replaced earlier messages), so a reader never has to guess.
- ``response``: what the provider returned for that iteration.

Every record has ``session_id``, ``iteration`` and ``ts``. Writing only the new messages
keeps the file linear in the conversation (a full snapshot per turn is quadratic).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import IO, Any

from .providers.base import LlmRequest, LlmResponse, Provider


class TranscriptSink:
    """Appends ``message`` / ``request`` / ``response`` events to ``llm_transcript.jsonl``."""

    def __init__(self, directory: str) -> None:
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        self.path = path / "llm_transcript.jsonl"
        self._fh: IO[str] | None = self.path.open("a", encoding="utf-8")
        # per session: how many prompt messages were written, and the last one (to notice
        # a rewritten history without comparing the whole prompt every turn)
        self._written: dict[str, tuple[int, Any]] = {}

    def _write(self, record: dict[str, Any]) -> None:
        if self._fh is not None:
            record["ts"] = time.time()
            self._fh.write(json.dumps(record, default=str, ensure_ascii=False) + "\n")

    def request(
        self, session_id: str, iteration: int, request: LlmRequest, provider: Provider
    ) -> None:
        messages = request.messages
        count, last = self._written.get(session_id, (0, None))
        appended = len(messages) >= count and (count == 0 or messages[count - 1] == last)
        if appended:
            for index in range(count, len(messages)):
                self._write(
                    {
                        "type": "message",
                        "session_id": session_id,
                        "iteration": iteration,
                        "index": index,
                        "message": messages[index],
                    }
                )
        else:
            self._write(
                {
                    "type": "request",
                    "session_id": session_id,
                    "iteration": iteration,
                    "provider": getattr(provider, "name", None),
                    "model": request.model,
                    "system": request.system,
                    "messages": messages,
                    "tools": [t["name"] for t in request.tools],
                }
            )
        if messages:
            self._written[session_id] = (len(messages), messages[-1])

    def response(
        self,
        session_id: str,
        iteration: int,
        response: LlmResponse,
        provider: Provider | None = None,
    ) -> None:
        self._write(
            {
                "type": "response",
                "session_id": session_id,
                "iteration": iteration,
                "provider": getattr(provider, "name", None),
                **response.to_dict(),
            }
        )

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
