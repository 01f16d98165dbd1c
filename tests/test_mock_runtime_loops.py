"""The mock runtime leaves no event loop open behind a program: Pulumi's mock monitor awaits in
worker threads, each on an event loop of its own; `run_program` gives each worker its loop and
closes them all when the program is done (an open one is closed by the garbage collector at exit,
after its file descriptors are gone, and prints a spurious traceback)."""

from __future__ import annotations

import asyncio
import gc

import pulumi

from infra.mock_runtime import run_program


def _program() -> None:
    parent = pulumi.ComponentResource("test:index:Parent", "parent", None)
    for i in range(20):
        pulumi.CustomResource("test:index:Thing", f"thing-{i}", {"n": i}, pulumi.ResourceOptions(parent=parent))


def _open_loops() -> list[asyncio.AbstractEventLoop]:
    current = asyncio.get_event_loop_policy()._local._loop
    return [o for o in gc.get_objects() if isinstance(o, asyncio.AbstractEventLoop) and o is not current and not o.is_closed()]


def test_every_worker_loop_is_closed_after_the_program():
    recording = run_program(_program)
    assert len(recording.registrations) == 21
    assert _open_loops() == []


def test_the_caller_gets_a_usable_event_loop_back():
    run_program(_program)
    loop = asyncio.get_event_loop_policy()._local._loop
    assert loop is not None and not loop.is_closed()
    assert loop.run_until_complete(asyncio.sleep(0, result="ok")) == "ok"
