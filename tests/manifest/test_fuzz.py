"""Random TOML documents and random field values never produce a traceback."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from charter.cli import cli
from charter.manifest import load_manifest, manifest_to_dict
from charter.manifest.spec import PERSONA

from .conftest import PERSONA as PERSONA_TEMPLATE

KEYS = [*PERSONA.lookup, "budget", "daily_usd", "name", "x", "allow", "deny", "route", "target"]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(
        [
            "",
            " ",
            "github.pr_opened",
            "*/5 * * * *",
            "human:x",
            "persona://a",
            "a",
            "pkg.m:run",
            "read_only",
            "suggest",
            "required",
            "git.get_diff",
        ]
    ),
)
values: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), inner, max_size=5),
    ),
    max_leaves=20,
)


def _toml_value(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, (int, str)):
        return json.dumps(value)
    if isinstance(value, list):
        items = [_toml_value(v) for v in value]
        return "[" + ", ".join(i for i in items if i is not None) + "]"
    items = [(k, _toml_value(v)) for k, v in value.items()]
    return "{" + ", ".join(f"{json.dumps(k)} = {v}" for k, v in items if v is not None) + "}"


def _check(path: Path) -> None:
    manifest = load_manifest(path, include_global=False)
    json.dumps(manifest_to_dict(manifest))  # the JSON form is always serialisable
    for err in manifest.errors:
        assert err.manifest_path and isinstance(err.message, str)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(fields=st.dictionaries(st.sampled_from(KEYS), values, max_size=8))
def test_random_persona_fields(tmp_path: Path, fields: dict[str, Any]) -> None:
    rendered = {k: _toml_value(v) for k, v in fields.items()}
    body = "[[personas]]\n" + "".join(
        f"{json.dumps(k)} = {v}\n" for k, v in rendered.items() if v is not None
    )
    file = tmp_path / "charter.toml"
    file.write_text(body)
    _check(file)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(key=st.sampled_from(list(PERSONA.lookup)), value=values)
def test_random_value_for_each_field(tmp_path: Path, key: str, value: Any) -> None:
    rendered = _toml_value(value)
    base = PERSONA_TEMPLATE.format(name="alpha")
    lines = [line for line in base.splitlines() if not line.startswith(f"{key} =")]
    if rendered is not None:
        lines.append(f"{key} = {rendered}")
    file = tmp_path / "charter.toml"
    file.write_text("\n".join(lines) + "\n")
    _check(file)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    text=st.text(alphabet=st.sampled_from(list("[]{}=\"., \n#abcnpersonas_-:0129'")), max_size=80)
)
def test_random_text_through_cli(tmp_path: Path, text: str) -> None:
    file = tmp_path / "charter.toml"
    file.write_text(text)
    result = CliRunner().invoke(cli, ["persona", "check", str(file), "--json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code in (0, 1)
    json.loads(result.stdout)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    policy=st.dictionaries(
        st.sampled_from(
            ["tools", "mcpServers", "bash", "paths", "network", "policy", "defaults", "x"]
        ),
        values,
        max_size=4,
    )
)
def test_random_persona_json(tmp_path: Path, policy: dict[str, Any]) -> None:
    d = tmp_path / ".personas" / "p"
    d.mkdir(parents=True, exist_ok=True)
    (d / "AGENTS.md").write_text("# p\n")
    (d / "persona.json").write_text(json.dumps({"policy": policy}, allow_nan=True))
    _check(d)


def _fields() -> list[Any]:
    from charter.manifest.spec import BUDGET, MODEL_POLICY, ROLLOUT_POLICY, RUNTIME

    return [f for spec in (PERSONA, BUDGET, MODEL_POLICY, ROLLOUT_POLICY, RUNTIME)
            for f in spec.fields if f.kind in ("string", "enum", "number", "integer")]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(_fields()), scalars)
def test_read_tables_fast_path_agrees_with_convert(field: Any, value: Any) -> None:
    """read_table's shortcut for valid scalars gives exactly what convert gives."""
    from charter.manifest.errors import Collector
    from charter.manifest.fields import convert, read_table
    from charter.manifest.spec import TableSpec

    spec = TableSpec("t", "one field", (field,))
    fast, slow = Collector("m"), Collector("m")
    table = read_table({field.name: value}, spec, "p", fast)
    ok, converted = convert(value, field, f"p.{field.name}", slow)
    assert table is not None
    assert (field.name in table) is ok
    if ok:
        got = table[field.name]
        assert type(got) is type(converted)
        assert got == converted or (math.isnan(got) and math.isnan(converted))
    assert fast.errors == slow.errors
