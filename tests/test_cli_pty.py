"""Progress bars in a real terminal (issue 8, item 7).

The rest of the suite runs with stderr captured, where no bar is ever drawn; here the CLI runs
with stdin/stdout/stderr on a pseudo-terminal (python's ``pty``), so tqdm really draws. A
crash in that path (e.g. an undeclared tqdm, a zero-width terminal) shows up as a traceback.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")

# What tqdm draws: "50%|█████     | 2/4"; a bare "\r" (the pty turns "\n" into "\r\n").
BAR = re.compile(r"\d+%\||█|\r(?!\n)")


def run_in_pty(argv: list[str], *, env: dict | None = None, columns: int = 100,
               timeout: float = 600) -> tuple[int, str]:
    """Run ``argv`` with a pseudo-terminal as its stdin, stdout and stderr; return (exit
    code, everything it wrote)."""
    master, slave = pty.openpty()
    if columns:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    full_env = {k: v for k, v in os.environ.items() if k != "DELPHI_QUIET"}
    full_env.update({"TERM": os.environ.get("TERM") or "xterm", **(env or {})})
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=full_env,
                            close_fds=True, start_new_session=True)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every writer closed the terminal
                    data = b""
                if data:
                    chunks.append(data)
                    continue
                if proc.poll() is not None:
                    break
            elif proc.poll() is not None:
                break  # exited; worker processes may still hold the terminal open
            if time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"{argv} did not finish in {timeout} s:\n"
                            + b"".join(chunks).decode(errors="replace")[-2000:])
        code = proc.wait(timeout=30)
    finally:
        os.close(master)
    return code, b"".join(chunks).decode("utf-8", errors="replace")


def delphi_command() -> list[str]:
    script = Path(sys.executable).with_name("delphi")
    return [str(script)] if script.exists() else [sys.executable, "-m", "delphi.cli"]


MAP_JOBS = """
import time
from delphi.parallel import map_jobs
from delphi.cli import note
def job(i):
    time.sleep(0.05)
    return i * i
assert map_jobs(job, range(20), desc="squares") == [i * i for i in range(20)]
note("done")
"""


@pytest.mark.parametrize("columns", [100, 0])   # 0: a terminal that reports no width
def test_progress_bar_is_drawn_on_a_terminal_and_quiet_turns_it_off(columns):
    env = {"DELPHI_PROGRESS_DELAY": "0"}
    code, out = run_in_pty([sys.executable, "-c", MAP_JOBS], env=env, columns=columns)
    assert code == 0 and "Traceback" not in out, out
    assert BAR.search(out.replace("\r\n", "\n")), out
    assert "delphi: note: done" in out
    code, out = run_in_pty([sys.executable, "-c", MAP_JOBS], columns=columns,
                           env={**env, "DELPHI_QUIET": "1"})
    assert code == 0 and "Traceback" not in out, out
    assert not BAR.search(out.replace("\r\n", "\n")), out
    assert "note" not in out


@pytest.mark.shared_data
def test_cli_bootstrap_in_a_terminal(data_dir):
    # A bootstrap (40 refits of Chinchilla Approach 3 on Epoch's 240 points), run as a user
    # would in a terminal: the bar is drawn, the result printed; --quiet draws no bar.
    argv = delphi_command() + ["predict", "epoch-chinchilla", "--law", "chinchilla",
                               "--target-params", "7e10", "--target-tokens", "1.4e12",
                               "--n-boot", "40", "--interval", "bootstrap"]
    env = {"DELPHI_PROGRESS_DELAY": "0"}   # draw the bar even if the bootstrap is quick
    code, out = run_in_pty(argv, env=env)
    assert code == 0, out
    assert "Traceback" not in out, out
    assert "prediction" in out and "(bootstrap; run noise" in out
    assert BAR.search(out.replace("\r\n", "\n")), out
    code, quiet = run_in_pty(argv[:2] + ["--quiet"] + argv[2:], env=env)
    assert code == 0, quiet
    assert "Traceback" not in quiet, quiet
    assert "prediction" in quiet
    assert not BAR.search(quiet.replace("\r\n", "\n")), quiet


def test_usage_error_in_a_terminal_is_one_line():
    code, out = run_in_pty(delphi_command() + ["-q", "predict", "x", "--level", "2"])
    assert code == 2 and "Traceback" not in out
    assert "a level is in (0, 1)" in out
