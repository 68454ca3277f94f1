"""docs/launch.md's enforcement matrix is the output of `charter print-policy --matrix`."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import charter

DOC = Path(__file__).resolve().parents[2] / "docs" / "launch.md"


def test_docs_matrix_is_generated_by_the_translators(tmp_path: Path) -> None:
    out = charter("print-policy", "--matrix", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    text = DOC.read_text(encoding="utf-8")
    section = text.split("<!-- matrix:start -->\n", 1)[1].split("<!-- matrix:end -->", 1)[0]
    assert section == out.stdout, (
        "docs/launch.md is out of date: regenerate the matrix section with "
        "`charter print-policy --matrix`"
    )


def test_matrix_json_covers_every_cli_and_element(tmp_path: Path) -> None:
    data = json.loads(charter("print-policy", "--matrix", "--json", cwd=tmp_path).stdout)
    assert {
        "tools.allow",
        "paths.read.deny",
        "network.deny",
        "commands.deny",
        "mcp_servers.allow",
        "autonomy_tier",
    } <= set(data)
    for row in data.values():
        assert set(row) == {"claude", "codex", "gemini", "opencode"}
        assert all(cell["strength"] in ("strong", "partial", "none") for cell in row.values())
        for cell in row.values():
            strong = cell["strength"] == "strong"
            assert (cell["enforced_by"] in ("cli", "sandbox", "both")) == strong
    # What the notes measured: Claude's --tools is a real allow list; codex has none.
    assert data["tools.allow"]["claude"]["strength"] == "strong"
    assert data["network.deny"]["codex"]["enforced_by"] == "cli"
    # Claude alone cannot stop Bash from reaching the network; the sandbox around it does
    claude = data["network.deny"]["claude"]
    assert claude["cli_alone"]["strength"] == "partial"
    assert (claude["strength"], claude["enforced_by"]) == ("strong", "both")
    # opencode has no path translation at all: the sandbox alone holds it
    assert data["paths.read.deny"]["opencode"]["enforced_by"] == "sandbox"
    assert data["paths.read.deny"]["opencode"]["cli_alone"]["strength"] == "none"
    # the sandbox cannot judge command lines: those stay below strong
    assert data["commands.deny"]["claude"]["strength"] == "partial"
