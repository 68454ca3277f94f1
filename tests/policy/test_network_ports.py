"""A network rule naming a port allows that port only (issue 30 item 3)."""

from __future__ import annotations

from charter.policy import Frame, Policy, ToolAnnotations, ToolCall, decide

ANN = ToolAnnotations(url_args=("url",))


def allowed(rules: dict[str, list[str]], url: str) -> bool:
    frames = [Frame(Policy.from_dict({"network": rules}), label="t")]
    return decide(ToolCall("fetch", {"url": url}, ANN), frames).allowed


def test_a_port_rule_allows_that_port_only() -> None:
    rules = {"allow": ["http://127.0.0.1:8080"]}
    assert allowed(rules, "http://127.0.0.1:8080/v1/messages")
    assert not allowed(rules, "http://127.0.0.1:8081/")
    assert not allowed(rules, "http://127.0.0.1/")  # port 80
    assert not allowed(rules, "127.0.0.1")  # no port known: not that port


def test_https_default_port_and_portless_rules() -> None:
    assert allowed({"allow": ["https://api.example.com:443"]}, "https://api.example.com/x")
    assert not allowed({"allow": ["https://api.example.com:443"]}, "https://api.example.com:8443/")
    assert allowed({"allow": ["api.example.com"]}, "https://api.example.com:8443/")


def test_a_port_deny_denies_that_port_and_unknown_ports() -> None:
    rules = {"deny": ["127.0.0.1:5432"]}
    assert not allowed(rules, "http://127.0.0.1:5432/")
    assert allowed(rules, "http://127.0.0.1:8080/")
    assert not allowed(rules, "127.0.0.1")
