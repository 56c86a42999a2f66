"""The process harness (tests/harness.py) that the slow tests and the bench stand on: a program
is stopped group and all, and a program that dies or never gets ready says why."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.harness import Program, wait_for

# A leader that shrugs off SIGTERM, and a child of its group that would outlive it.
STUBBORN = "trap '' TERM; sleep 60 & echo child $!; echo ready; wait"


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_stop_kills_the_whole_group_of_a_program_that_ignores_sigterm(tmp_path: Path) -> None:
    program = Program(["sh", "-c", STUBBORN], tmp_path / "stubborn.log", stop_timeout=0.5)
    program.wait_until(lambda: "ready" in program.text(), timeout=10, what="the shell")
    child = int(program.text().split()[1])
    program.stop()
    assert program.proc.returncode == -signal.SIGKILL
    wait_for(lambda: gone(child), timeout=5, what="the child to be killed with its group")


def test_a_program_that_exits_while_awaited_fails_with_its_log(tmp_path: Path) -> None:
    with (
        Program(["sh", "-c", "echo no config >&2; exit 3"], tmp_path / "x.log") as program,
        pytest.raises(AssertionError, match=r"exited \(3\):\nno config"),
    ):
        program.wait_until(lambda: False, timeout=10, what="never")


def test_a_program_that_never_gets_ready_fails_with_its_log(tmp_path: Path) -> None:
    with (
        Program(["sh", "-c", "echo starting; sleep 60"], tmp_path / "y.log") as program,
        pytest.raises(AssertionError, match=r"waiting for the answer; the log of .*\nstarting"),
    ):
        program.wait_until(lambda: False, timeout=0.3, what="the answer")


def test_text_is_this_run_of_an_appended_log(tmp_path: Path) -> None:
    log = tmp_path / "z.log"
    log.write_text("an earlier run\n")
    with Program(["echo", "this run"], log, append=True) as program:
        program.proc.wait(10)
    assert program.text() == "this run\n"
    assert log.read_text() == "an earlier run\nthis run\n"
