"""Property test (issue 22): ``verify`` accepts exactly the registries the API can produce.

Each example runs a random sequence of operations on one registry file: legal and illegal
calls of the API (``register_external`` of predictions and projections, final and partial
``score``, ``repair``), each through one of several paths to the file (the path itself, a
symlink from another folder, a hard link, a relative path), and what happens to files
outside the API's control: a writer killed mid-append (the last line cut anywhere, newline
included) and git's CRLF conversion. Throughout:

* an API call either succeeds or raises :class:`~delphi.errors.RegistryError`, and a refused
  call leaves the file byte-identical;
* a file that only the API wrote verifies; after a kill or a CRLF conversion it does not,
  appends refuse it, and ``repair`` restores a file that verifies (through any path: symlinks
  stay symlinks, hard links stay one file).

Then one illegal edit is applied to the final file, with every hash recomputed and chained
(the strongest forgery: only the invariants can catch it) or, for the tamper cases, without:
``verify`` must reject it naming the line of the edit, and an append must refuse the file.

Reproducible: ``derandomize=True``, ``database=None``, as in ``tests/test_fuzz.py``; 150
examples, about three CPU-seconds (the files live in /dev/shm where it exists: every append
fsyncs).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from delphi.errors import RegistryError  # noqa: E402
from delphi.registry import GENESIS, Registry, canonical_json, entry_hash  # noqa: E402


def fuzz_settings(n: int):
    return settings(max_examples=n, derandomize=True, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# Mostly legal calls (so that registries grow), some the API must refuse: bad ids, values out
# of range for the unit, duplicate ids, outcomes of unknown ids or projections, second final
# outcomes, partial outcomes without a curve or before it. (sampled_from weights by
# repetition.)
OP = st.fixed_dictionaries({
    "op": st.sampled_from(["register"] * 4 + ["score"] * 4 + ["repair", "kill", "crlf"]),
    # register: a new id, one already taken, or one register refuses; score: the n-th id
    # registered so far (a projection, perhaps), or one never registered.
    "id": st.sampled_from(["new"] * 6 + ["taken", "p1/outcome-1", "x" * 65, "bad id"]),
    "ref": st.integers(0, 5), "ghost": st.sampled_from([False] * 7 + [True]),
    "kind": st.sampled_from(["prediction", "prediction", "projection"]),
    "curve": st.booleans(), "interval": st.booleans(),
    "unit": st.sampled_from([None, "bits/byte", "accuracy", "BPB"]),
    "good": st.sampled_from([True, True, True, False]),
    "fraction": st.sampled_from([1.0, 1.0, 0.6, 0.3, 0.1]),
    "path": st.sampled_from(["real", "symlink", "hard link", "relative"]),
    "cut": st.floats(0.0, 1.0)})
# A few legal registrations first (what scores and edits need), then anything.
LEGAL_REGISTER = OP.map(lambda op: {**op, "op": "register", "id": "new", "good": True})
OPS = st.builds(lambda first, rest: first + rest, st.lists(LEGAL_REGISTER, min_size=1,
                                                           max_size=3),
                st.lists(OP, min_size=1, max_size=12))


class Files:
    """One registry and its aliases in a scratch folder; Registry objects kept per alias (so
    each keeps its cache across other writers' appends)."""

    def __init__(self, root: Path):
        self.root = root
        (root / "shared").mkdir()
        (root / "other").mkdir()
        self.real = root / "shared" / "preds.jsonl"
        (root / "other" / "preds.jsonl").symlink_to("../shared/preds.jsonl")
        self.paths = {"real": self.real, "symlink": root / "other" / "preds.jsonl",
                      "hard link": root / "hard.jsonl", "relative": Path("shared/preds.jsonl")}
        self.regs: dict[str, Registry] = {}
        self.ids: list[str] = []
        """Ids registered, in order."""

    def reg(self, alias: str) -> Registry:
        if alias == "hard link" and not self.paths["hard link"].exists():
            if not self.real.exists():
                alias = "real"          # nothing to link to yet
            else:
                os.link(self.real, self.paths["hard link"])
        if alias not in self.regs:
            self.regs[alias] = Registry(self.paths[alias], lock_timeout=5)
        return self.regs[alias]

    def data(self) -> bytes:
        return self.real.read_bytes() if self.real.exists() else b""


def api_call(files: Files, op: dict) -> None:
    """Run one API operation; RegistryError is a legal refusal (file unchanged)."""
    before = files.data()
    reg = files.reg(op["path"])
    try:
        if op["op"] == "register":
            acc = op["unit"] == "accuracy"
            loss = (0.6 if acc else 2.5) if op["good"] else (2.5 if acc else 1e-6)
            id = {"new": f"p{len(files.ids) + 1}",
                  "taken": files.ids[op["ref"] % len(files.ids)] if files.ids else "p1"
                  }.get(op["id"], op["id"])
            reg.register_external(
                id=id, kind=op["kind"], loss=loss, source="prop",
                target={"flops": 1e22, **({"unit": op["unit"]} if op["unit"] else {})},
                curve=[(0.25, 0.4 if acc else 3.2), (1.0, loss)] if op["curve"] else None,
                interval=((0.5, 0.7, 0.9) if acc else (2.3, 2.7, 0.9)) if op["interval"]
                else None)
            files.ids.append(id)
        elif op["op"] == "score":
            id = "ghost" if op["ghost"] or not files.ids else files.ids[op["ref"] % len(files.ids)]
            acc = files.real.exists() and any(
                e.id == id and e.target.unit == "accuracy" for e in reg.entries()
                if e.kind != "outcome")
            actual = (0.62 if acc else 2.6) if op["good"] else 500.0
            reg.score(id, actual, fraction=op["fraction"])
        else:
            reg.repair()
    except RegistryError as exc:
        assert "\n" not in str(exc), str(exc)
        assert files.data() == before, f"{op} was refused but changed the file"


def next_line(files: Files) -> bytes:
    """The line the next append would write (made by the API on a copy of the file)."""
    scratch = files.root / "scratch.jsonl"
    shutil.copyfile(files.real, scratch)
    Registry(scratch).register_external(id=f"k{len(files.data())}", loss=2.4, source="prop",
                                        target={"flops": 1e21}, notes="killed writer " * 5)
    line = scratch.read_bytes()[len(files.data()):]
    scratch.unlink()
    return line


def check_states(files: Files, ops: list) -> None:
    """Run ``ops``; a file that only the API wrote verifies, a damaged one is repaired."""
    damaged = False
    for op in ops:
        if op["op"] in ("kill", "crlf"):
            if damaged or not files.data():
                continue        # a writer refuses a damaged file before writing anything
            if op["op"] == "kill":
                line = next_line(files)
                cut = min(len(line) - 1, max(1, int(op["cut"] * len(line))))  # maybe only "\n"
                files.real.write_bytes(files.data() + line[:cut])
            else:
                files.real.write_bytes(files.data().replace(b"\n", b"\r\n"))
            damaged = True
            report = Registry(files.real).verify()
            assert not report.ok and report.repairable, report
            before = files.data()
            with pytest.raises(RegistryError):
                files.reg("symlink").register_external(id="refused", loss=2.5, source="p",
                                                        target={"flops": 1e21})
            assert files.data() == before
            continue
        api_call(files, op)
        if damaged and op["op"] == "repair" and Registry(files.real).verify().ok:
            damaged = False
        if not damaged and files.real.exists():
            report = Registry(files.real).verify()
            assert report.ok, (op, report)
    if damaged:
        assert files.reg("relative").repair() is not None
    assert not files.real.exists() or Registry(files.real).verify().ok
    assert files.paths["symlink"].is_symlink()
    if files.paths["hard link"].exists():
        assert os.stat(files.paths["hard link"]).st_ino == os.stat(files.real).st_ino


# ------------------------------------------------------------------ illegal edits
@lru_cache(maxsize=1)
def templates() -> tuple[dict, dict]:
    """A prediction (with curve and interval) and its final outcome, as the API writes them."""
    with tempfile.TemporaryDirectory() as folder:
        reg = Registry(Path(folder) / "t.jsonl")
        reg.register_external(id="t", loss=2.5, source="prop", target={"flops": 1e22},
                              curve=[(0.25, 3.2), (1.0, 2.5)], interval=(2.3, 2.7, 0.9))
        reg.score("t", 2.6)
        lines = (Path(folder) / "t.jsonl").read_bytes().splitlines()
    return json.loads(lines[0]), json.loads(lines[1])


def chain(raws: list[dict], start: int = 0) -> bytes:
    """Lines with the hashes from ``start`` on recomputed and chained (signatures dropped)."""
    prev, out = GENESIS, []
    for i, raw in enumerate(raws):
        if i >= start:
            raw = {k: v for k, v in raw.items() if k != "signature"}
            raw["prev_hash"] = prev
            raw["hash"] = entry_hash(raw)
        prev = raw["hash"]
        out.append(canonical_json(raw).encode("ascii") + b"\n")
    return b"".join(out)


def last_time(raws):
    return raws[-1]["created_at"] if raws else "2026-01-01T00:00:00Z"


def prediction(raws, **changes):
    pred, _ = templates()
    return {**pred, "created_at": last_time(raws), **changes}


def outcome(raws, of, n, fraction=1.0):
    _, out = templates()
    return {**out, "id": f"{of}/outcome-{n}", "created_at": last_time(raws),
            "outcome": {**out["outcome"], "of": of, "fraction": fraction}}


def n_outcomes(raws, id):
    return sum(r["kind"] == "outcome" and r["outcome"]["of"] == id for r in raws)


def illegal_edits(raws: list[dict]) -> list[tuple[str, bytes, int]]:
    """(name, file bytes, the line verify must name) for every illegal edit that applies."""
    n = len(raws)
    edits = [
        ("future date", chain(raws + [prediction(raws, id="late", created_at=(
            datetime.now(timezone.utc) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"))],
            n), n + 1),
        ("prediction named like an outcome",
         chain(raws + [prediction(raws, id="p9/outcome-1")], n), n + 1),
        ("id too long", chain(raws + [prediction(raws, id="y" * 65)], n), n + 1),
        ("loss out of range", chain(raws + [prediction(raws, id="tiny", forecast={
            **templates()[0]["forecast"], "loss": 1e-5, "interval": None, "curve": None})], n),
         n + 1),
        ("unit alias", chain(raws + [prediction(raws, id="u", target={
            **templates()[0]["target"], "unit": "bpb"})], n), n + 1),
        ("outcome of an unknown id", chain(raws + [outcome(raws, "ghost", 1)], n), n + 1),
    ]
    if raws:
        edits.append(("dated before the last entry", chain(raws + [prediction(
            raws, id="early", created_at="2000-01-01T00:00:00Z")], n), n + 1))
        edits.append(("duplicate id", chain(raws + [prediction(raws, id=raws[0]["id"])], n),
                      n + 1))
        lines = chain(raws).splitlines(keepends=True)
        flipped = lines[0].replace(b'"flops":', b'"flops":1', 1)
        edits.append(("altered without rehash", b"".join([flipped] + lines[1:]), 1))
    if n >= 2:
        lines = chain(raws).splitlines(keepends=True)
        edits.append(("deleted line", b"".join(lines[1:]), 1))
    for i, raw in enumerate(raws):
        if raw["kind"] == "outcome":
            edits.append(("outcome renamed", chain(raws[:i] + [{**raw, "id": "zzz"}]
                                                    + raws[i + 1:], i), i + 1))
            continue
        k = n_outcomes(raws, raw["id"])
        final = any(r["kind"] == "outcome" and r["outcome"]["of"] == raw["id"]
                    and r["outcome"]["fraction"] == 1.0 for r in raws)
        if raw["kind"] == "projection":
            edits.append(("outcome of a projection",
                          chain(raws + [outcome(raws, raw["id"], 1)], n), n + 1))
        elif final:
            edits.append(("second final outcome",
                          chain(raws + [outcome(raws, raw["id"], k + 1)], n), n + 1))
        else:
            edits.append(("outcome numbered wrong",
                          chain(raws + [outcome(raws, raw["id"], k + 2)], n), n + 1))
        if raw["kind"] == "prediction" and raw["forecast"]["curve"] is None:
            edits.append(("partial outcome without a curve",
                          chain(raws + [outcome(raws, raw["id"], k + 1, 0.5)], n), n + 1))
    return edits


# In memory where there is a tmpfs: each append fsyncs, and on a disk the examples would
# spend most of their time waiting for it.
_FAST = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


@contextlib.contextmanager
def scratch_folder():
    """A fresh folder, the working directory while it is used (for the relative path)."""
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="delphi-registry-prop-", dir=_FAST) as folder:
        os.chdir(folder)
        try:
            yield Path(folder)
        finally:
            os.chdir(cwd)


@fuzz_settings(150)
@given(OPS, st.data())
def test_verify_accepts_exactly_what_the_api_writes(ops, data):
    with scratch_folder() as root:
        files = Files(root)
        check_states(files, ops)
        raws = [json.loads(line) for line in files.data().splitlines()]
        name, edited, line = data.draw(st.sampled_from(illegal_edits(raws)), label="edit")
        files.real.write_bytes(edited)
        report = Registry(files.real).verify()
        assert not report.ok and report.line == line, (name, report)
        assert not report.repairable and f"line {line}" in str(report), (name, report)
        assert "\n" not in str(report)
        with pytest.raises(RegistryError, match=f"line {line}"):
            Registry(files.paths["symlink"]).register_external(
                id="after-edit", loss=2.5, source="p", target={"flops": 1e21})
        assert files.real.read_bytes() == edited
