"""How far is charter's token estimate from tiktoken? (charter.agent.tokens)

Compaction counts OpenAI prompts exactly (tiktoken) and every other provider with a
lexical estimate; ``bytes / 4`` is printed beside it as the baseline. This measures both
against tiktoken's
o200k_base and cl100k_base on message-sized chunks of three kinds of agent traffic:
prose (docs/*.md), code (src/**/*.py) and tool output (JSON of the event log shapes),
and prints the error per kind: mean absolute error, the 95th percentile, and the bias
(estimate / exact over the whole kind). Needs the encodings (``make tokenizers``).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from charter.agent.tokens import EstimateCounter, _encoding

ROOT = Path(__file__).resolve().parent.parent
CHUNK = 2000  # characters: about one tool result or a long message


def chunks(texts: list[str]) -> list[str]:
    out = []
    for text in texts:
        out.extend(text[i : i + CHUNK] for i in range(0, len(text), CHUNK))
    return [c for c in out if c.strip()]


def corpus() -> dict[str, list[str]]:
    prose = [p.read_text() for p in sorted((ROOT / "docs").glob("*.md"))]
    code = [p.read_text() for p in sorted((ROOT / "src").rglob("*.py"))]
    tool = [
        json.dumps(
            {
                "status": "ok",
                "path": f"src/module_{i}.py",
                "matches": [
                    {"line": j, "text": f"def handler_{j}(request): return {j}"} for j in range(40)
                ],
                "elapsed_ms": 12.5 * i,
            }
        )
        for i in range(60)
    ]
    return {"prose": chunks(prose), "code": chunks(code), "tool_output": chunks(tool)}


def main() -> None:
    estimates = {"lexical": EstimateCounter().text, "bytes/4": lambda t: (len(t.encode()) + 3) // 4}
    head = f"{'estimate':<9} {'kind':<12} {'encoding':<12} {'chunks':>6}"
    print(f"{head} {'mean |err|':>10} {'p95 |err|':>9} {'bias':>6}")
    for name in ("o200k_base", "cl100k_base"):
        enc = _encoding(name)
        if enc is None:
            raise SystemExit(f"{name} is not installed: run make tokenizers")
        for (label, estimate), (kind, items) in (
            (e, k) for e in estimates.items() for k in corpus().items()
        ):
            errors, est_total, exact_total = [], 0, 0
            for chunk in items:
                exact = len(enc.encode(chunk, disallowed_special=()))
                guess = estimate(chunk)
                errors.append(abs(guess - exact) / exact)
                est_total += guess
                exact_total += exact
            errors.sort()
            p95 = errors[int(len(errors) * 0.95) - 1]
            print(
                f"{label:<9} {kind:<12} {name:<12} {len(items):>6} {statistics.mean(errors):>9.1%} "
                f"{p95:>9.1%} {est_total / exact_total:>6.2f}"
            )


if __name__ == "__main__":
    main()
