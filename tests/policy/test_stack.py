from __future__ import annotations

import asyncio
import threading

import pytest

from charter.policy import (
    Policy,
    ToolAnnotations,
    ToolCall,
    current_stack,
    decide_current,
    decide_current_resource,
    effective,
    with_execution_policy,
    with_handoff_policy,
)

READ_NOTE = ToolCall("read_note", {}, ToolAnnotations())
BASH = ToolCall("bash", {}, ToolAnnotations())


def test_push_pop_and_exception_safety() -> None:
    assert current_stack() == ()
    with (
        pytest.raises(RuntimeError),
        with_execution_policy({"tools": ["read_note"]}, label="outer"),
    ):
        assert [f.label for f in current_stack()] == ["outer"]
        assert decide_current(BASH).denied
        raise RuntimeError("boom")
    assert current_stack() == ()
    assert decide_current(BASH).allowed


def test_nested_frames_only_narrow() -> None:
    with with_execution_policy({"tools": ["read_note", "bash"]}, label="persona", kind="persona"):
        assert decide_current(BASH).allowed
        # an inner frame that lists more tools still cannot widen the outer one
        with with_execution_policy({"tools": ["*"]}, label="wide"):
            assert decide_current(ToolCall("write", {}, ToolAnnotations())).denied
        with with_execution_policy(
            {"tools": ["read_note"]}, label="stage", kind="stage", stage="s"
        ):
            d = decide_current(BASH)
            assert d.denied and d.frame_label == "stage" and d.frame_kind == "stage"
        assert decide_current(BASH).allowed


def test_handoff_override_replaces_and_records_source() -> None:
    with with_execution_policy({"tools": ["bash"]}, label="session"):
        with with_handoff_policy(
            {"tools": ["read_note"], "side_effect_level": "read_only"}, source_handoff="h-1"
        ):
            assert decide_current(BASH).denied
            view = effective(current_stack())
            assert view["source_handoff"] == "h-1"
            assert [f["kind"] for f in view["frames"]] == ["handoff"]
            d = decide_current(ToolCall("read_note", {}, ToolAnnotations(side_effect_level=None)))
            assert d.denied and d.dimension == "side_effect_level"
            # later pushes intersect with the override
            with with_execution_policy({"tools": []}, label="stage"):
                assert decide_current(READ_NOTE).denied
        assert [f.label for f in current_stack()] == ["session"]
    with pytest.raises(ValueError), with_handoff_policy({}, source_handoff=""):
        pass


def test_threads_do_not_share_frames() -> None:
    seen: dict[str, object] = {}
    ready = threading.Event()
    release = threading.Event()

    def worker() -> None:
        seen["stack_in_thread"] = current_stack()
        with with_execution_policy({"tools": []}, label="thread"):
            ready.set()
            release.wait(5)
            seen["thread_decision"] = decide_current(BASH).allowed

    with with_execution_policy({"tools": ["bash"]}, label="main"):
        t = threading.Thread(target=worker)
        t.start()
        ready.wait(5)
        assert [f.label for f in current_stack()] == ["main"]
        assert decide_current(BASH).allowed
        release.set()
        t.join(5)
    assert seen["stack_in_thread"] == ()
    assert seen["thread_decision"] is False


def test_asyncio_tasks_have_their_own_stacks() -> None:
    async def scoped(label: str, tools: list[str], gate: asyncio.Event) -> tuple[str, bool]:
        with with_execution_policy({"tools": tools}, label=label):
            await gate.wait()
            return current_stack()[-1].label, decide_current(BASH).allowed

    async def main() -> list[tuple[str, bool]]:
        gate = asyncio.Event()
        tasks = [
            asyncio.create_task(scoped("a", ["bash"], gate)),
            asyncio.create_task(scoped("b", [], gate)),
        ]
        await asyncio.sleep(0)
        gate.set()
        return list(await asyncio.gather(*tasks))

    assert asyncio.run(main()) == [("a", True), ("b", False)]
    assert current_stack() == ()


def test_resource_decisions_use_the_stack() -> None:
    with with_execution_policy(Policy.from_dict({"members": ["writer"]}), label="scope"):
        assert decide_current_resource("members", "writer").allowed
        assert decide_current_resource("members", "hacker").denied
