"""One failing fixture per validation rule; each states the field path and message it expects.

Fixture header lines ``# expect: FIELD_PATH | MESSAGE SUBSTRING`` list *every* error
the file must produce, so a rule that cascades into extra errors fails too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from charter.manifest import load_manifest

from .conftest import FIXTURES

INVALID = sorted((FIXTURES / "invalid").glob("*.toml"))


def _expectations(path: Path) -> list[tuple[str, str]]:
    out = []
    for line in path.read_text().splitlines():
        if line.startswith("# expect:"):
            field, _, message = line[len("# expect:") :].partition("|")
            out.append((field.strip(), message.strip()))
    return out


def test_every_fixture_declares_expectations() -> None:
    assert len(INVALID) >= 60
    for path in INVALID:
        assert _expectations(path), path.name


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_invalid_fixture(path: Path) -> None:
    manifest = load_manifest(path, include_global=False)
    got = [(e.field_path, e.message) for e in manifest.errors]
    expected = _expectations(path)
    assert len(got) == len(expected), got
    for field, message in expected:
        assert any(f == field and message.lower() in m.lower() for f, m in got), (
            field,
            message,
            got,
        )
    for err in manifest.errors:
        assert err.manifest_path == str(path)
        # every field error in these small files can be located
        assert err.line is not None, err


def test_errors_are_collected_not_first_only(tmp_path: Path) -> None:
    body = (FIXTURES / "invalid" / "negative_budget.toml").read_text()
    body = body.replace(
        "budget = { daily_usd = -1.0 }",
        'budget = { daily_usd = -1.0, run_usd = nan }\nschedules = ["bad"]\n'
        'handoffs = ["nobody"]\ncapabilities = ["x"]',
    )
    file = tmp_path / "charter.toml"
    file.write_text(body)
    fields = {e.field_path for e in load_manifest(file, include_global=False).errors}
    assert {
        "personas[0].budget.daily_usd",
        "personas[0].budget.run_usd",
        "personas[0].schedules[0]",
        "personas[0].handoffs[0]",
        "personas[0].capabilities[0]",
    } <= fields


def test_toml_syntax_error_has_line_and_column(tmp_path: Path) -> None:
    file = tmp_path / "charter.toml"
    file.write_text('[[personas]]\nname = "alpha"\ndescription = "unterminated\n')
    manifest = load_manifest(file, include_global=False)
    [err] = manifest.errors
    assert err.manifest_path == str(file)
    assert err.message.startswith("invalid TOML")
    assert err.line == 3 and err.column is not None
    assert str(err).startswith(f"{file}:3:{err.column}: ")


def test_toml_syntax_error_in_discovered_manifest_is_an_error(project: Path) -> None:
    (project / "charter.toml").write_text("[[personas]\n")
    manifest = load_manifest(cwd=project)
    assert manifest.manifest_path == str(project / "charter.toml")
    assert manifest.errors and "invalid TOML" in manifest.errors[0].message
    assert manifest.errors[0].line == 1


def test_duplicate_key_is_a_syntax_error_with_position(tmp_path: Path) -> None:
    file = tmp_path / "charter.toml"
    file.write_text('[[personas]]\nname = "a"\nname = "b"\n')
    [err] = load_manifest(file, include_global=False).errors
    assert err.line == 3


def test_not_utf8(tmp_path: Path) -> None:
    file = tmp_path / "charter.toml"
    file.write_bytes(b"name = '\xff'\n")
    [err] = load_manifest(file, include_global=False).errors
    assert "not UTF-8" in err.message


def test_declared_capabilities_extend_the_surface(tmp_path: Path) -> None:
    (tmp_path / "caps.json").write_text('{"vault": ["unseal"]}')
    (tmp_path / "caps.txt").write_text("# extra\nbilling.refund\n")
    base = (FIXTURES / "invalid" / "unknown_capability.toml").read_text()
    for check in (
        '[check]\nhost_capabilities = ["git.teleport"]\n',
        '[check]\nhost_capabilities = { git = ["teleport"] }\n',
    ):
        file = tmp_path / "charter.toml"
        file.write_text(check + base)
        assert load_manifest(file, include_global=False).ok
    body = base.replace('["git.teleport"]', '["vault.unseal", "billing.refund", "git.*"]')
    for name in ("caps.json", "caps.txt"):
        file = tmp_path / "charter.toml"
        other = "caps.txt" if name == "caps.json" else "caps.json"
        file.write_text(f'[check]\nhost_capabilities_path = "{name}"\n' + body)
        errors = load_manifest(file, include_global=False).errors
        missing = "billing.refund" if name == "caps.json" else "vault.unseal"
        assert [e.field_path for e in errors] == [
            "personas[0].capabilities[" + ("1" if missing == "billing.refund" else "0") + "]"
        ], (other, errors)


def test_custom_predicates_are_accepted_when_declared(tmp_path: Path) -> None:
    base = (FIXTURES / "invalid" / "route_unknown_predicate.toml").read_text()
    for fix in (
        base.replace('id = "r"', 'id = "r"\ncustom_predicates = ["flaky_ci"]'),
        '[check]\ncustom_predicates = ["flaky_ci"]\n' + base,
    ):
        file = tmp_path / "charter.toml"
        file.write_text(fix)
        assert load_manifest(file, include_global=False).ok, fix
