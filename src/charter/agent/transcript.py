"""``llm_transcript_dir``: an auditable JSONL sidecar of every model turn."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import IO, Any

from .providers.base import LlmRequest, LlmResponse, Provider


class TranscriptSink:
    """Appends ``message`` (request) and ``response`` events to ``llm_transcript.jsonl``."""

    def __init__(self, directory: str) -> None:
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        self.path = path / "llm_transcript.jsonl"
        self._fh: IO[str] | None = self.path.open("a", encoding="utf-8")

    def _write(self, record: dict[str, Any]) -> None:
        if self._fh is not None:
            record["ts"] = time.time()
            self._fh.write(json.dumps(record, default=str, ensure_ascii=False) + "\n")

    def request(
        self, session_id: str, iteration: int, request: LlmRequest, provider: Provider
    ) -> None:
        self._write(
            {
                "type": "request",
                "session_id": session_id,
                "iteration": iteration,
                "provider": getattr(provider, "name", None),
                "model": request.model,
                "system": request.system,
                "messages": request.messages,
                "tools": [t["name"] for t in request.tools],
            }
        )

    def response(self, session_id: str, iteration: int, response: LlmResponse) -> None:
        self._write(
            {
                "type": "response",
                "session_id": session_id,
                "iteration": iteration,
                **response.to_dict(),
            }
        )

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
