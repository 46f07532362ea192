"""Issue 22, the registry's items: one lock per file whatever the path (item 1), `verify`
checks every invariant `register` and `score` keep (item 3), and bad timestamps, FIFOs,
devices and oversized files as registries or keys are one-line errors (item 5).

The files under ``tests/data/registry/`` are the hostile test's reproducers (issue 22): chains
that verified although the API never writes them (``alice.key.pub`` signed the ``_signed``
one).
"""

from __future__ import annotations

import errno
import fcntl
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import threading
import time
import types
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from delphi import RegistryError
from delphi.cli import main as cli_main
from delphi.registry import Registry, canonical_json, entry_hash
from delphi.registry.schema import GENESIS

DATA = Path(__file__).resolve().parent / "data" / "registry"
FORK = mp.get_context("fork")


def external(reg: Registry, id: str, loss: float = 2.5, **kw):
    kw.setdefault("target", {"flops": 1e21})
    kw.setdefault("source", "test")
    return reg.register_external(id=id, loss=loss, **kw)


def run_cli(capsys, *argv):
    code = cli_main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(err: str) -> bool:
    return err.count("\n") == 1 and err.startswith("delphi: error: ") and "Traceback" not in err


# ============================================================================ item 1: one lock
@pytest.fixture()
def aliases(tmp_path, monkeypatch):
    """A registry ``shared/preds.jsonl`` (one entry) and other paths to it: two symlinks in
    other folders, a hard link, a relative path and a symlinked folder."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "shared").mkdir()
    real = tmp_path / "shared" / "preds.jsonl"
    external(Registry(real), "seed")
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "preds.jsonl").symlink_to("../shared/preds.jsonl")
    os.link(real, tmp_path / "hard.jsonl")
    (tmp_path / "linked-folder").symlink_to("shared")
    return {"real": real, "symlink a": tmp_path / "a" / "preds.jsonl",
            "symlink b": tmp_path / "b" / "preds.jsonl", "hard link": tmp_path / "hard.jsonl",
            "relative": Path("shared/preds.jsonl"),
            "symlinked folder": tmp_path / "linked-folder" / "preds.jsonl"}


@pytest.mark.parametrize("holder,writer", [
    ("real", "symlink a"), ("symlink a", "symlink b"), ("real", "hard link"),
    ("hard link", "symlink b"), ("relative", "hard link"), ("symlinked folder", "hard link"),
])
def test_every_path_to_one_registry_takes_the_same_lock(aliases, holder, writer):
    """While one writer holds the lock through one path, a writer through any other path to
    the same file waits (here: times out) instead of appending beside it."""
    before = aliases["real"].read_bytes()
    with Registry(aliases[holder])._lock():
        with pytest.raises(RegistryError, match="could not lock") as info:
            external(Registry(aliases[writer], lock_timeout=0.2), "intruder")
        assert "\n" not in str(info.value)
    assert aliases["real"].read_bytes() == before
    external(Registry(aliases[writer]), "after")       # and the lock is free again
    assert Registry(aliases["real"]).verify().n_entries == 2


def _writer(path: str, name: str, n: int, cwd: str) -> None:
    os.chdir(cwd)
    reg = Registry(path)
    for i in range(n):
        external(reg, f"{name}-{i}", 2.0 + i * 1e-3)


def test_writers_through_symlinks_hard_links_and_relative_paths_keep_one_chain(aliases,
                                                                                 tmp_path):
    """symlink_lock_fork.sh: four writers through four paths to one file, concurrently."""
    names = ["symlink a", "symlink b", "hard link", "relative"]
    procs = [FORK.Process(target=_writer, args=(str(aliases[k]), f"w{j}", 25, str(tmp_path)))
             for j, k in enumerate(names)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * 4
    report = Registry(aliases["real"]).verify()
    assert report.ok and report.n_entries == 1 + 4 * 25, report
    assert os.stat(aliases["hard link"]).st_ino == os.stat(aliases["real"]).st_ino


def test_a_waiting_writer_relocks_a_file_replaced_while_it_waited(tmp_path):
    """A writer that was waiting for the lock on a file that was then replaced (renamed over:
    git checkout, an editor, a writer through another mount) appends to the file now at the
    path, not to the replaced one."""
    path = tmp_path / "r.jsonl"
    external(Registry(path), "seed")
    content = path.read_bytes()
    fd = os.open(path, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)    # another writer holds the file (e.g. through a mount)
    errors: list[BaseException] = []

    def write():
        try:
            external(Registry(path), "waiter")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
    thread = threading.Thread(target=write)
    thread.start()
    try:
        time.sleep(0.3)
        assert thread.is_alive(), "the writer did not wait for the lock on the file"
        fresh = tmp_path / "fresh"
        fresh.write_bytes(content)
        os.replace(fresh, path)       # the file at the path is a new one now
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        thread.join(timeout=30)
    try:
        orphan = os.pread(fd, 1 << 20, 0)
    finally:
        os.close(fd)
    assert not errors, errors
    assert orphan == content                                   # nothing went to the old file
    assert [e.id for e in Registry(path).entries()] == ["seed", "waiter"]
    assert Registry(path).verify().ok


def _crlf(path: Path) -> bytes:
    good = path.read_bytes()
    path.write_bytes(good.replace(b"\n", b"\r\n"))            # e.g. git autocrlf
    return good


def test_repair_through_a_symlink_repairs_the_real_file_and_keeps_the_link(tmp_path, capsys,
                                                                           monkeypatch):
    """repair_replaces_symlink.sh."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "shared").mkdir()
    real = tmp_path / "shared" / "preds.jsonl"
    external(Registry(real), "p1")
    good = _crlf(real)
    link = tmp_path / "preds.jsonl"
    link.symlink_to("shared/preds.jsonl")
    code, out, err = run_cli(capsys, "registry", "repair", "--registry", "preds.jsonl")
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == "shared/preds.jsonl"
    assert real.read_bytes() == good and Registry(real).verify().ok
    assert (tmp_path / "shared" / "preds.jsonl.bak").read_bytes() == good.replace(b"\n",
                                                                                  b"\r\n")
    assert not (tmp_path / "preds.jsonl.bak").exists()      # the backup is beside the file
    # A torn line through the symlink too.
    real.write_bytes(good + b'{"id":"torn')
    assert Registry(link).repair() is not None
    assert link.is_symlink() and real.read_bytes() == good


def test_repair_keeps_hard_links_one_file(tmp_path):
    real = tmp_path / "r.jsonl"
    external(Registry(real), "p1")
    _crlf(real)
    other = tmp_path / "other.jsonl"
    os.link(real, other)
    assert Registry(other).repair() is not None
    assert os.stat(real).st_ino == os.stat(other).st_ino and os.stat(real).st_nlink == 2
    external(Registry(other), "p2")                 # an append through one name...
    assert [e.id for e in Registry(real).entries()] == ["p1", "p2"]   # ...is in the other
    assert Registry(real).verify().ok


def test_a_failed_in_place_repair_puts_the_old_bytes_back(tmp_path, monkeypatch):
    import delphi.registry.core as core

    path = tmp_path / "r.jsonl"
    external(Registry(path), "p1")
    good = _crlf(path)
    crlf = path.read_bytes()
    real_write_all, calls = core._write_all, []

    def write_all(fd, view):            # the backup is written, then the disk fills up
        calls.append(len(view))
        if len(calls) == 2:
            os.write(fd, bytes(view[:10]))
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write_all(fd, view)
    monkeypatch.setattr(core, "_write_all", write_all)
    with pytest.raises(RegistryError, match="No space left.*the file is unchanged") as info:
        Registry(path).repair()
    assert "\n" not in str(info.value) and len(calls) == 3
    assert path.read_bytes() == crlf and Path(str(path) + ".bak").read_bytes() == crlf
    monkeypatch.undo()
    assert Registry(path).repair() is not None and path.read_bytes() == good


def test_a_refused_first_append_leaves_no_file(tmp_path):
    """Taking the lock creates the registry file (its flock needs one); an append refused
    under the lock removes it again."""
    path = tmp_path / "none.jsonl"
    with pytest.raises(RegistryError, match="register a prediction first"):
        Registry(path).score("p", 2.5)
    assert not path.exists()
    link = tmp_path / "link.jsonl"
    link.symlink_to("target.jsonl")                 # a symlink to a file not there yet
    external(Registry(link), "p")
    assert link.is_symlink() and Registry(tmp_path / "target.jsonl").verify().n_entries == 1


_BIND_CHILD = r"""
import json, os, subprocess, sys
from pathlib import Path
from delphi import RegistryError
from delphi.registry import Registry
host, mounted = Path(sys.argv[1]), Path(sys.argv[2])
reg = Registry(host)
reg.register_external(id="seed", loss=2.5, target={"flops": 1e21}, source="t")
mounted.touch()
subprocess.run(["mount", "--bind", str(host), str(mounted)], check=True)
out = {}
with reg._lock():
    try:
        Registry(mounted, lock_timeout=0.2).register_external(
            id="intruder", loss=2.5, target={"flops": 1e21}, source="t")
        out["blocked"] = False
    except RegistryError as exc:
        out["blocked"] = "could not lock" in str(exc)
# A layout repair from the host side, then an append through the mount: one file still.
host.write_bytes(host.read_bytes().replace(b"\n", b"\r\n"))
reg.repair()
Registry(mounted).register_external(id="via-mount", loss=2.5, target={"flops": 1e21},
                                    source="t")
out["host"] = [e.id for e in Registry(host).entries()]
out["ok"] = Registry(host).verify().ok
print(json.dumps(out))
"""


def test_a_file_bind_mounted_elsewhere_shares_the_lock_and_survives_repair(tmp_path):
    """A registry bind-mounted as a single file (as ``docker -v preds.jsonl:...`` does): the
    lock is the file's, so the two paths exclude each other, and repair keeps them one file.
    Runs in a private mount namespace (needs root and unshare)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("mount") is None:
        pytest.skip("needs root, unshare and mount for a private bind mount")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"unshare -m is not allowed here: {probe.stderr.decode().strip()}")
    (tmp_path / "host").mkdir()
    (tmp_path / "container").mkdir()
    host, mounted = tmp_path / "host" / "preds.jsonl", tmp_path / "container" / "preds.jsonl"
    proc = subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable, "-c",
                           _BIND_CHILD, str(host), str(mounted)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"blocked": True, "host": ["seed", "via-mount"], "ok": True}


# ======================================================== item 3: verify = what the API writes
REPRODUCERS = [
    ("second_final_outcome.jsonl", "p1/outcome-2", "second final outcome", "p1"),
    ("outcome_id_not_prefixed.jsonl", "zzz", "'p2/outcome-1'", "p2"),
    ("forged_outcome_named_prediction.jsonl", "p2/outcome-7", "reserved for outcome", "p2"),
    ("future_dated_entry.jsonl", "future", "in the future", "p2"),
]


@pytest.mark.parametrize("name,bad_id,words,scored", REPRODUCERS,
                         ids=[r[0].split(".")[0] for r in REPRODUCERS])
def test_verify_refuses_what_register_and_score_never_write(tmp_path, capsys, name, bad_id,
                                                            words, scored):
    path = tmp_path / name
    shutil.copy(DATA / name, path)
    before = path.read_bytes()
    report = Registry(path).verify()
    assert not report.ok and report.line == 6 and report.id == bad_id, report
    assert words in report.problem and "\n" not in str(report)
    assert report.n_entries == 5 and not report.repairable
    code, out, err = run_cli(capsys, "registry", "verify", "--registry", path)
    assert code == 1 and "FAILED at line 6" in out and words in out
    # Appends refuse to extend it (no second final outcome beside it, no AttributeError).
    with pytest.raises(RegistryError, match=r"line 6 .*nothing was written"):
        Registry(path).score(scored, 2.5)
    code, out, err = run_cli(capsys, "score", "--registry", path, "--id", scored, "--actual",
                             "2.5")
    assert code == 1 and one_line_error(err) and "line 6" in err, err
    assert path.read_bytes() == before
    code, out, err = run_cli(capsys, "registry", "report", "--registry", path)
    assert code == 1 and "does not verify" in err


def test_a_signed_second_final_outcome_is_refused_with_trusted_keys(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    shutil.copy(DATA / "second_final_outcome_signed.jsonl", path)
    report = Registry(path).verify(trusted_keys=DATA / "alice.key.pub")
    assert not report.ok and report.line == 6 and report.id == "p1/outcome-2"
    assert "second final outcome" in report.problem and "line 5" in report.problem
    code, out, _ = run_cli(capsys, "registry", "verify", "--registry", path, "--trusted-keys",
                           DATA / "alice.key.pub", "--json")
    assert code == 1 and json.loads(out)["line"] == 6


def _rechain(raws: list[dict]) -> bytes:
    """Lines as a writer that skips every check writes them: each hash recomputed and chained
    (signatures dropped), so only the invariants can catch an edit."""
    prev, out = GENESIS, []
    for raw in raws:
        raw = {k: v for k, v in raw.items() if k != "signature"}
        raw["prev_hash"] = prev
        raw["hash"] = entry_hash(raw)
        prev = raw["hash"]
        out.append(canonical_json(raw).encode("ascii") + b"\n")
    return b"".join(out)


def _api_registry(path: Path) -> list[dict]:
    reg = Registry(path)
    external(reg, "a", 2.5, interval=(2.4, 2.6, 0.9), curve=[(0.5, 2.9), (1.0, 2.5)])
    reg.score("a", 2.8, fraction=0.5)
    reg.score("a", 2.55)
    external(reg, "b", 2.4, target={"flops": 1e22, "unit": "bits/byte"})
    external(reg, "acc", 0.6, target={"flops": 1e22, "unit": "accuracy"},
             interval=(0.55, 0.65, 0.9))
    external(reg, "proj", 2.2, kind="projection")
    assert reg.verify().ok
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def _edit(raws, i, **changes):
    out = [dict(r) for r in raws]
    for key, value in changes.items():
        if "." in key:
            outer, inner = key.split(".")
            out[i][outer] = {**out[i][outer], inner: value}
        else:
            out[i][key] = value
    return out


def _outcome(raws, of, id, actual=2.5, fraction=1.0):
    base = raws[2]                                     # a/outcome-2, a final outcome
    return {**base, "id": id, "created_at": raws[-1]["created_at"],
            "outcome": {**base["outcome"], "of": of, "actual": actual, "fraction": fraction}}


def _future():
    return (datetime.now(timezone.utc) + timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%SZ")


# (name, edit of the API's entries, line verify names, words in its problem)
INVARIANTS = [
    ("prediction id too long", lambda r: _edit(r, 3, id="b" * 65), 4, "at most 64"),
    ("prediction id with /outcome-", lambda r: _edit(r, 3, id="b/outcome-1"), 4, "reserved"),
    ("loss out of range", lambda r: _edit(r, 3, **{"forecast.loss": 1e-5}), 4, "outside the range"),
    ("interval end out of range", lambda r: _edit(r, 0, **{"forecast.interval": {
        **r[0]["forecast"]["interval"], "upper": 150.0}}), 1, "interval.upper"),
    ("curve point out of range", lambda r: _edit(r, 0, **{"forecast.curve": [[0.5, 300.0], [1.0, 2.5]]}),
     1, "curve point 1"),
    ("accuracy above 1", lambda r: _edit(r, 4, **{"forecast.loss": 1.5, "forecast.interval": None}),
     5, "accuracy"),
    ("unit not as register writes it", lambda r: _edit(r, 3, **{"target.unit": "BPB"}), 4, "unit"),
    ("unknown unit", lambda r: _edit(r, 3, **{"target.unit": "furlongs"}), 4, "unit"),
    ("outcome actual out of range", lambda r: _edit(r, 2, **{"outcome.actual": 500.0}), 3,
     "outside the range"),
    ("outcome numbered wrong", lambda r: _edit(r, 2, id="a/outcome-3"), 3, "'a/outcome-2'"),
    ("first outcome numbered 2", lambda r: r[:1] + [{**r[2], "id": "a/outcome-2"}], 2,
     "'a/outcome-1'"),
    ("second final outcome", lambda r: r + [_outcome(r, "a", "a/outcome-3")], 7,
     "second final outcome"),
    ("partial outcome without a curve", lambda r: r + [_outcome(r, "b", "b/outcome-1",
                                                               fraction=0.5)], 7, "no forecast curve"),
    ("partial outcome before the curve", lambda r: r + [_outcome(r, "a", "a/outcome-3",
                                                                fraction=0.1)], 7, "before the start"),
    ("accuracy outcome above 1", lambda r: r + [_outcome(r, "acc", "acc/outcome-1", actual=2.5)],
     7, "accuracy"),
    ("outcome of a projection", lambda r: r + [_outcome(r, "proj", "proj/outcome-1")], 7,
     "a projection, not a prediction"),
    ("dated in the future", lambda r: _edit(r, 5, created_at=_future()), 6, "in the future"),
    ("dated before the previous entry", lambda r: _edit(r, 3, created_at="2001-01-01T00:00:00Z"),
     4, "time order"),
    ("date overflowing in UTC", lambda r: _edit(r, 0, created_at="0001-01-01T00:00:00+01:00"),
     1, "created_at"),
]


@pytest.mark.parametrize("name,edit,line,words", INVARIANTS, ids=[c[0] for c in INVARIANTS])
def test_verify_checks_each_invariant_register_and_score_keep(tmp_path, name, edit, line,
                                                              words):
    raws = _api_registry(tmp_path / "api.jsonl")
    path = tmp_path / "edited.jsonl"
    path.write_bytes(_rechain(edit(raws)))
    report = Registry(path).verify()
    assert not report.ok and report.line == line, report
    assert words in report.problem, report.problem
    assert "\n" not in str(report) and f"line {line}" in str(report)
    before = path.read_bytes()
    with pytest.raises(RegistryError, match=f"line {line} "):
        external(Registry(path), "next")
    assert path.read_bytes() == before


def test_score_numbers_outcomes_as_verify_expects(tmp_path):
    path = tmp_path / "r.jsonl"
    reg = Registry(path)
    external(reg, "a", curve=[(0.25, 3.0), (1.0, 2.5)])
    ids = [reg.score("a", 2.9, fraction=f).outcome_id for f in (0.3, 0.6)]
    ids.append(reg.score("a", 2.5).outcome_id)
    assert ids == ["a/outcome-1", "a/outcome-2", "a/outcome-3"]
    with pytest.raises(RegistryError, match="already has a final outcome"):
        reg.score("a", 2.4)
    assert reg.score("a", 2.95, fraction=0.4).outcome_id == "a/outcome-4"
    assert reg.verify().ok and reg.verify().n_entries == 5


# ============================================ item 5: timestamps, FIFOs, devices, huge files
EDGES = ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"]


@pytest.mark.parametrize("when", EDGES)
def test_created_at_at_the_ends_of_the_calendar_is_a_registry_error(tmp_path, capsys, when):
    path = tmp_path / "x.jsonl"
    code, _, err = run_cli(capsys, "register", "--registry", path, "--id", "t1",
                           "--external-loss", "2", "--external-source", "s", "--target-flops",
                           "1e22", "--created-at", when)
    assert code == 1 and one_line_error(err) and when in err and "UTC" in err, err
    aware = datetime.fromisoformat(when)
    for value in (when, aware):
        with pytest.raises(RegistryError, match="created_at"):
            external(Registry(path), "t2", created_at=value)
    external(Registry(path), "ok")
    for value in (when, aware):
        with pytest.raises(RegistryError, match="created_at"):
            Registry(path).score("ok", 2.5, created_at=value)
    assert Registry(path).verify().n_entries == 1


@pytest.fixture()
def fifo(tmp_path):
    """A named pipe. Should something open it (and hang), a helper opens its other end after
    20 s, so that the test fails (``fifo.opened``) instead of hanging."""
    path = tmp_path / "f.jsonl"
    os.mkfifo(path)
    fired: list[bool] = []

    def unblock():
        fired.append(True)
        os.close(os.open(path, os.O_RDWR | os.O_NONBLOCK))
    timer = threading.Timer(20.0, unblock)
    timer.start()
    yield types.SimpleNamespace(path=path, opened=fired)
    timer.cancel()


def test_a_fifo_as_registry_is_a_one_line_error_not_a_hang(fifo, capsys):
    path = fifo.path
    for argv in (["registry", "verify", "--registry", path],
                 ["registry", "list", "--registry", path],
                 ["registry", "repair", "--registry", path],
                 ["score", "--registry", path, "--id", "p", "--actual", "2.5"],
                 ["register", "--registry", path, "--id", "p", "--external-loss", "2",
                  "--external-source", "s", "--target-flops", "1e22"]):
        code, _, err = run_cli(capsys, *argv)
        assert code == 1 and one_line_error(err), (argv, err)
        assert f"{path} is a named pipe (FIFO), not a regular file" in err, err
    with pytest.raises(RegistryError, match="named pipe"):
        external(Registry(path), "p")
    with pytest.raises(RegistryError, match="trusted keys .* named pipe"):
        Registry(DATA / "second_final_outcome.jsonl").verify(trusted_keys=path)
    assert not fifo.opened, "something waited on the FIFO"


def test_a_directory_or_an_oversized_file_as_registry_or_keys(tmp_path, capsys, monkeypatch):
    import delphi.registry.core as core
    import delphi.registry.signing as signing

    folder = tmp_path / "dir.jsonl"
    folder.mkdir()
    code, _, err = run_cli(capsys, "registry", "verify", "--registry", folder)
    assert code == 1 and one_line_error(err) and "is a directory, not a regular file" in err
    path = tmp_path / "r.jsonl"
    external(Registry(path), "a")
    keys = tmp_path / "keys.pub"
    keys.write_text(DATA.joinpath("alice.key.pub").read_text() * 3)
    monkeypatch.setattr(core, "MAX_REGISTRY_BYTES", 100)
    monkeypatch.setattr(signing, "MAX_TRUSTED_KEYS_BYTES", 100)
    for call in (lambda: Registry(path).verify(), lambda: external(Registry(path), "b"),
                 lambda: Registry(path).entries()):
        with pytest.raises(RegistryError, match=r"r\.jsonl is [\d,]+ bytes, more than a registry"):
            call()
    with pytest.raises(RegistryError, match=r"keys\.pub is [\d,]+ bytes, more than a trusted keys file"):
        Registry(path).verify(trusted_keys=keys)


_DEVICE_CHILD = r"""
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, resource.getrlimit(resource.RLIMIT_AS)[1]))
import io, contextlib
from delphi.cli import main
out = []
for argv in (["registry", "verify", "--registry", "/dev/zero"],
             ["registry", "verify", "--registry", sys.argv[1], "--trusted-keys", "/dev/zero"],
             ["register", "--registry", "/dev/zero", "--id", "p", "--external-loss", "2",
              "--external-source", "s", "--target-flops", "1e22"],
             ["register", "--registry", sys.argv[1], "--id", "p", "--external-loss", "2",
              "--external-source", "s", "--target-flops", "1e22", "--sign-key", "/dev/zero"]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    out.append([code, err.getvalue()])
print(json.dumps(out))
"""


def test_dev_zero_as_registry_or_keys_is_a_one_line_error(tmp_path):
    """/dev/zero read without bound ended in MemoryError; under a 3 GiB address-space limit,
    in a child process so that a regression cannot take the test run's memory."""
    path = tmp_path / "r.jsonl"
    external(Registry(path), "a")
    proc = subprocess.run([sys.executable, "-c", _DEVICE_CHILD, str(path)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for code, err in json.loads(proc.stdout.strip().splitlines()[-1]):
        assert code == 1 and one_line_error(err), err
        assert "/dev/zero is a character device, not a regular file" in err, err
