"""The engine's deep-stack thread: one per process, exceptions re-raised in the caller."""

from __future__ import annotations

import multiprocessing
import sys
import threading

import pytest

from cuda2npu.core import deep_stack
from cuda2npu.core.deep_stack import RECURSION_LIMIT, run_deep


def _thread_name_and_limit() -> tuple[int, str, int]:
    return threading.get_ident(), threading.current_thread().name, sys.getrecursionlimit()


def test_calls_share_one_engine_thread_with_a_high_recursion_limit():
    limit = sys.getrecursionlimit()
    first = run_deep(_thread_name_and_limit)
    second = run_deep(_thread_name_and_limit)
    assert first[0] == second[0] != threading.get_ident()
    assert first[1] == "cuda2npu-engine"
    assert first[2] >= RECURSION_LIMIT
    assert sys.getrecursionlimit() == limit  # the caller's limit is restored


def _depth(n: int) -> int:
    return 0 if n == 0 else 1 + _depth(n - 1)


def test_deep_recursion_runs_and_too_deep_raises_in_the_caller():
    assert run_deep(_depth, 5_000) == 5_000  # past the default limit of 1000
    with pytest.raises(RecursionError):
        run_deep(_depth, RECURSION_LIMIT * 2)


def _child(queue) -> None:
    queue.put(run_deep(_thread_name_and_limit)[0])


@pytest.mark.skipif(sys.platform == "win32", reason="fork")
def test_a_forked_process_gets_its_own_engine_thread():
    run_deep(_thread_name_and_limit)  # the parent's thread exists before the fork
    parent_thread = deep_stack._thread
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child, args=(queue,))
    child.start()
    child_ident = queue.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0
    assert child_ident  # answered: a stale parent thread would have hung the child
    assert deep_stack._thread is parent_thread
