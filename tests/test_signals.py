"""SIGTERM and SIGHUP end delphi the way Ctrl-C does (issue 22, item 4): parallel workers
stopped, one line on stderr, the pipes closed, no orphan holding delphi's stdout open."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from delphi.cli import main

LADDER = str(Path(__file__).resolve().parents[1] / "ladders" / "marin-delphi-dense.csv")


def _children(pid: int) -> list[int]:
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            # The command name is in parentheses and may hold spaces: fields follow the last ')'.
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(entry))
    return kids


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _is_worker(pid: int) -> bool:
    try:
        return b"LokyProcess" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc (Linux)")
def test_sigterm_during_a_parallel_bootstrap_stops_the_workers():
    # A bootstrap far too long to finish, on two loky workers; SIGTERM once both run.
    argv = [sys.executable, "-m", "delphi.cli", "predict", LADDER, "--target-flops", "1e23",
            "--interval", "bootstrap", "--n-boot", "100000", "-j", "2", "--json"]
    env = {**os.environ, "DELPHI_QUIET": "1"}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    kids: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            kids = _children(proc.pid)
            if sum(map(_is_worker, kids)) >= 2:
                break
            time.sleep(0.05)
        assert sum(map(_is_worker, kids)) >= 2, "the workers did not start"
        time.sleep(0.3)  # the workers are inside their first chunk of draws
        proc.send_signal(signal.SIGTERM)
        # communicate() returns only once every holder of the pipes (the workers) is gone.
        out, err = proc.communicate(timeout=10)
        assert proc.returncode == 128 + signal.SIGTERM
        assert err.decode() == "delphi: error: terminated (SIGTERM)\n"
        error = json.loads(out)["error"]
        assert error["type"] == "Interrupted" and "SIGTERM" in error["message"]
        deadline = time.monotonic() + 5          # the resource trackers exit on their own
        while time.monotonic() < deadline and any(map(_alive, kids)):
            time.sleep(0.05)
        assert not [k for k in kids if _alive(k)], "orphaned workers"
    finally:
        for pid in [proc.pid, *kids]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_are_one_line_and_the_shell_exit_code(name, monkeypatch, capsys):
    # In process: the handler turns the signal into the Ctrl-C path, and is removed afterwards.
    import delphi.forecast

    sig = getattr(signal, name)
    before = signal.getsignal(sig)

    def killed(*args, **kwargs):
        os.kill(os.getpid(), sig)
        time.sleep(5)                             # the handler raises before this ends
        raise AssertionError("the signal was not handled")

    monkeypatch.setattr(delphi.forecast, "predict", killed)
    code = main(["predict", LADDER, "--target-flops", "1e22"])
    out, err = capsys.readouterr()
    assert code == 128 + sig
    assert err == f"delphi: error: terminated ({name})\n" and out == ""
    assert signal.getsignal(sig) is before


def test_an_ignored_sighup_stays_ignored(monkeypatch, capsys):
    # `nohup delphi ...`: SIGHUP is ignored before delphi starts and must stay so.
    import delphi.forecast

    seen = {}

    def record(*args, **kwargs):
        seen["handler"] = signal.getsignal(signal.SIGHUP)
        raise KeyboardInterrupt

    monkeypatch.setattr(delphi.forecast, "predict", record)
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        assert main(["predict", LADDER, "--target-flops", "1e22"]) == 130
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert seen["handler"] is signal.SIG_IGN
    assert capsys.readouterr().err == "delphi: error: interrupted\n"
