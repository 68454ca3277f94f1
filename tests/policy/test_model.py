from __future__ import annotations

import pytest

from charter.policy import Policy, PolicyError, Rules, SideEffectLevel


def test_short_form_is_tools_allow() -> None:
    p = Policy.from_dict({"tools": ["Read_Note"], "side_effect_level": "read_only"})
    assert p.tools == Rules((("read_note",),), ())
    assert p.side_effect_level is SideEffectLevel.READ_ONLY
    assert p.to_dict() == {"tools": {"allow": ["read_note"]}, "side_effect_level": "read_only"}


def test_long_form_and_aliases() -> None:
    p = Policy.from_dict(
        {
            "tools": {"allow": ["bash", "read"], "deny": ["webfetch"]},
            "paths": {"allow": ["./"], "deny": ["~/.ssh"], "write": {"allow": ["./src"]}},
            "mcpServers": {"allow": ["filesystem"], "deny": ["dangerous-server"]},
            "bash": {"allow": ["git:*"], "deny": ["curl:*"]},
            "network": {"deny": ["*"]},
            "members": [],
            "capabilities": ["git.get_diff", "process.*"],
            "allow_sensitive": ["env_files"],
        }
    )
    assert p.mcp_servers.deny == ("dangerous-server",)
    assert p.commands.allow == (("git:*",),)
    assert p.members == Rules(((),), ())
    assert p.paths.write.allow == (("./src",),)
    assert p.allow_sensitive == frozenset({"env_files"})
    assert Policy.from_dict(p.to_dict()) == p


def test_empty_allow_differs_from_omitted() -> None:
    assert Policy.from_dict({"tools": []}).tools.restricted
    assert not Policy.from_dict({}).tools.restricted


def test_errors_are_collected_with_field_paths() -> None:
    with pytest.raises(PolicyError) as info:
        Policy.from_dict(
            {
                "tools": {"allow": ["ok", 3, " "], "block": ["x"]},
                "side_effect_level": "root",
                "network": ["*.x*", "a*b.com", "exa mple.com", "https://x.com/path"],
                "commands": [":*"],
                "capabilities": ["nodot"],
                "allow_sensitive": ["everything"],
                "colour": "blue",
                "paths": "./src",
            },
            source="p.toml",
        )
    issues = {i.field_path: i.message for i in info.value.issues}
    assert "tools.allow[1]" in issues and "string" in issues["tools.allow[1]"]
    assert "non-blank" in issues["tools.allow[2]"]
    assert "unknown field" in issues["tools.block"]
    assert "read_only" in issues["side_effect_level"]
    assert all(f"network[{i}]" in issues for i in range(4))
    assert "no program" in issues["commands[0]"]
    assert "namespace.operation" in issues["capabilities[0]"]
    assert "env_files" in issues["allow_sensitive[0]"]
    assert "unknown field" in issues["colour"]
    assert "expected a list" in issues["paths"]
    assert str(info.value).startswith("p.toml: ")


def test_duplicate_dimension_via_alias_is_an_error() -> None:
    with pytest.raises(PolicyError, match="same dimension"):
        Policy.from_dict({"commands": ["git:*"], "bash": ["npm:*"]})


def test_not_a_table() -> None:
    with pytest.raises(PolicyError, match="expected a table"):
        Policy.from_dict(["tools"])  # type: ignore[arg-type]


def test_intersect_takes_lowest_ceiling_and_common_lifts() -> None:
    a = Policy.from_dict(
        {"side_effect_level": "network", "allow_sensitive": ["env_files", "pem_files"]}
    )
    b = Policy.from_dict({"side_effect_level": "read_only", "allow_sensitive": ["env_files"]})
    c = a.intersect(b)
    assert c.side_effect_level is SideEffectLevel.READ_ONLY
    assert c.allow_sensitive == frozenset({"env_files"})
    assert Policy().intersect(b).side_effect_level is SideEffectLevel.READ_ONLY


def test_policy_is_immutable() -> None:
    p = Policy()
    with pytest.raises(AttributeError):
        p.tools = Rules()  # type: ignore[misc]


def test_with_name_keeps_rules() -> None:
    p = Policy.from_dict({"tools": ["a"]})
    named = p.with_name("x")
    assert named.name == "x" and named == p


def test_allows_nothing() -> None:
    assert Policy.from_dict({"network": {"deny": ["*"]}}).network.allows_nothing
    assert Policy.from_dict({"commands": []}).commands.allows_nothing
    assert not Policy.from_dict({"commands": ["git:*"]}).commands.allows_nothing
    assert not Policy().network.allows_nothing
