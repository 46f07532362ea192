"""Verifying a registry file: every line canonical, hashed, chained, unique and consistent."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from pydantic import ValidationError

from ..errors import RegistryError
from .schema import GENESIS, Entry, canonical_json, entry_hash, validation_message

__all__ = ["VerifyReport", "Signer", "verify_bytes", "split_lines"]

_ID_GUESS = re.compile(rb'"id":"([A-Za-z0-9._:/@+-]{1,80})"')


@dataclass(frozen=True)
class VerifyReport:
    """The result of checking a registry file (:meth:`Registry.verify`).

    ``ok`` is True when every line is a canonical, schema-valid entry whose hash matches its
    content and whose ``prev_hash`` is the previous entry's hash, ids are unique, every outcome
    scores an earlier prediction, and the file ends with a newline. Otherwise ``line`` (1-based)
    and ``id`` name the *first* problem.

    What this proves: SHA-256 chaining detects edits, deletions and reorders *within* the file,
    but anyone with write access can recompute every hash. A rewrite or a truncation is caught
    only against a head published elsewhere (``verify(expect_head=...)``), and a forged but
    well-chained append always verifies, unless trusted keys are given: then every entry must
    carry a valid signature by one of them (:mod:`delphi.registry.signing`).
    """

    path: str
    ok: bool
    n_entries: int
    """Entries verified (all of them when ``ok``)."""
    head: str | None
    """Hash of the last verified entry (None for an empty registry)."""
    problem: str | None = None
    line: int | None = None
    id: str | None = None
    torn: bool = False
    """The problem is an interrupted append at the end of the file, which
    :meth:`Registry.repair` fixes; every earlier entry verified."""
    tail_complete: bool = False
    """The torn tail is a whole valid entry missing only its newline (repair completes it)."""
    signers: tuple["Signer", ...] = ()
    """Who signed each verified entry, in file order."""
    trusted: bool = False
    """Signers were checked against trusted keys (every verified entry is signed by one)."""

    @property
    def repairable(self) -> bool:
        return self.torn

    def to_dict(self) -> dict:
        """JSON-ready dict (``delphi registry verify --json``)."""
        return {"path": self.path, "ok": self.ok, "n_entries": self.n_entries, "head": self.head,
                "problem": self.problem, "line": self.line, "id": self.id, "torn": self.torn,
                "repairable": self.repairable, "trusted_keys": self.trusted,
                "signers": [s.to_dict() for s in self.signers]}

    def signer_lines(self) -> list[str]:
        """One line per verified entry naming its signer (``unsigned`` when none)."""
        return [f"{s.line:>5}  {s.id:<40} {s.describe()}" for s in self.signers]

    def __str__(self) -> str:
        if self.ok:
            return (f"{self.path}: OK, {self.n_entries} entries, chain intact"
                    + (f", head {self.head}" if self.head else ""))
        where = f"line {self.line}" + (f" (id {self.id})" if self.id else "")
        hint = (f"; run `delphi registry repair {self.path}` (it keeps a backup)"
                if self.torn else "")
        return (f"{self.path}: FAILED at {where}: {self.problem}{hint} "
                f"[{self.n_entries} entries verified before it]")


@dataclass(frozen=True)
class Signer:
    """The signer of one entry: its public key (None when unsigned) and, when it is one of the
    trusted keys, the name given to it there."""

    line: int
    id: str
    key: str | None
    """Public key, ``ed25519:<base64>``; None for an unsigned entry."""
    name: str | None = None

    @property
    def fingerprint(self) -> str | None:
        from .signing import fingerprint

        return None if self.key is None else fingerprint(self.key)

    def describe(self) -> str:
        if self.key is None:
            return "unsigned"
        return f"signed by {self.name} ({self.fingerprint})" if self.name else \
            f"signed by {self.fingerprint}"

    def to_dict(self) -> dict:
        return {"line": self.line, "id": self.id, "key": self.key,
                "fingerprint": self.fingerprint, "name": self.name}


def split_lines(data: bytes) -> tuple[list[bytes], bytes]:
    """Complete lines (without newlines) and the torn tail after the last newline (or b"")."""
    parts = data.split(b"\n")
    return parts[:-1], parts[-1]


def _guess_id(line: bytes) -> str | None:
    m = _ID_GUESS.search(line)
    return m.group(1).decode("ascii") if m else None


def _loads(line: bytes):
    try:
        return json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None


class _Problem(Exception):
    def __init__(self, message: str, id: str | None):
        super().__init__(message)
        self.message, self.id = message, id


def _check_line(line: bytes, raw, prev: str) -> Entry:
    """The entry on ``line`` if it is intact and follows ``prev``; else raises _Problem."""
    rid = raw.get("id") if isinstance(raw, dict) else None
    rid = rid if isinstance(rid, str) else _guess_id(line)
    if not line.strip():
        raise _Problem("is empty", None)
    if raw is None:
        raise _Problem("is not valid JSON: altered or truncated", rid)
    if not isinstance(raw, dict):
        raise _Problem("is not a JSON object", rid)
    declared = raw.get("hash")
    try:
        actual = entry_hash(raw)
    except RegistryError:
        raise _Problem("holds a non-finite number (NaN or infinity)", rid) from None
    if declared != actual:
        raise _Problem("is altered: its content does not match its hash", rid)
    try:
        entry = Entry.model_validate_json(line)
    except ValidationError as exc:
        raise _Problem(validation_message(exc, "entry"), rid) from None
    # Compare with the canonical form of what was read (not of the model's dump), so files
    # written before an optional field was added keep verifying.
    if canonical_json(raw).encode("ascii") != line:
        raise _Problem("is not in canonical form (whitespace, key order or number format "
                       "changed)", rid)
    if entry.signature is not None:
        from .signing import fingerprint, signature_valid

        if not signature_valid(raw):
            raise _Problem(f"has a signature that does not verify with the key it names "
                           f"({fingerprint(entry.signature.key)}): the entry was altered after "
                           f"it was signed, or the signature is forged", rid)
    return entry


def verify_bytes(data: bytes, path: str | Path, expect_head: str | None = None,
                 trusted_keys: Mapping[str, str] | None = None) -> VerifyReport:
    """Check the registry content ``data`` (the bytes of the file at ``path``).

    Parameters
    ----------
    expect_head: a head hash published earlier; the check fails when no entry has it
        (entries were removed from the end, or the history was rewritten).
    trusted_keys: ``{public key text: name}`` (:func:`~delphi.registry.signing.
        load_trusted_keys`); when given, an entry that is unsigned or signed by another key
        fails the check. A signature that does not verify fails it in any case.
    """
    path = str(path)
    seen: dict[bytes, int] = {}
    signers: list[Signer] = []
    lines, tail = split_lines(data)
    raws = [_loads(line) for line in lines]
    # Where each declared hash sits, to tell a reordering from a deletion.
    declared = {r["hash"]: i for i, r in enumerate(raws, 1)
                if isinstance(r, dict) and isinstance(r.get("hash"), str)}
    prev, prev_id, prev_time = GENESIS, None, None
    kinds: dict[str, tuple[str, int]] = {}

    def fail(n: int, line_no: int, message: str, id: str | None, **kw) -> VerifyReport:
        return VerifyReport(path, False, n, prev if n else None, message, line_no, id, **kw,
                            signers=tuple(signers), trusted=trusted_keys is not None)

    for i, (line, raw) in enumerate(zip(lines, raws), 1):
        try:
            entry = _check_line(line, raw, prev)
        except _Problem as p:
            rid = p.id
            if rid is None and raw is None and i < len(lines) and raws[i] is None:
                rid = _guess_id(lines[i])  # a newline inserted into an entry splits it in two
            return fail(i - 1, i, p.message, rid)
        if line in seen:  # a copied line: say so, rather than blame the chain's order
            return fail(i - 1, i, f"duplicates line {seen[line]}: the same entry appears twice",
                        entry.id)
        seen[line] = i
        if entry.prev_hash != prev:
            before = "the start of the chain" if i == 1 else f"line {i - 1} (id {prev_id})"
            j = declared.get(entry.prev_hash)
            if j is not None:
                why = (f"it follows line {j} (id {raws[j - 1].get('id')}): entries were "
                       f"reordered, or entries between them were inserted or moved")
            else:
                why = ("it follows no entry in the file: the entry before it was deleted "
                       "or altered")
            return fail(i - 1, i, f"is out of the chain: its prev_hash does not match "
                        f"{before}; {why}", entry.id)
        if entry.id in kinds:
            return fail(i - 1, i, f"repeats the id of line {kinds[entry.id][1]}", entry.id)
        if prev_time is not None and entry.created_at < prev_time:
            return fail(i - 1, i, f"is dated {entry.created_at.isoformat()}, before line {i - 1} "
                        f"({prev_time.isoformat()}): entries must be in time order", entry.id)
        if entry.kind == "outcome":
            ref = kinds.get(entry.outcome.of)
            if ref is None:
                return fail(i - 1, i, f"scores {entry.outcome.of!r}, which is not registered "
                            f"before it", entry.id)
            if ref[0] != "prediction":
                return fail(i - 1, i, f"scores {entry.outcome.of!r}, a {ref[0]}, not a "
                            f"prediction", entry.id)
        key = None if entry.signature is None else "ed25519:" + entry.signature.key
        if trusted_keys is not None:
            if key is None:
                return fail(i - 1, i, "is not signed, but trusted keys were given: anyone with "
                            "write access could have appended it", entry.id)
            if key not in trusted_keys:
                from .signing import fingerprint

                return fail(i - 1, i, f"is signed by {fingerprint(key)}, which is not one of the "
                            f"trusted keys", entry.id)
        signers.append(Signer(i, entry.id, key, (trusted_keys or {}).get(key)))
        kinds[entry.id] = (entry.kind, i)
        prev, prev_id, prev_time = entry.hash, entry.id, entry.created_at
    n = len(lines)
    if tail:
        try:
            entry = _check_line(tail, _loads(tail), prev)
            complete = entry.prev_hash == prev and entry.id not in kinds
        except _Problem:
            entry, complete = None, False
        what = ("is a complete entry missing its final newline (an interrupted append); "
                "repair completes it" if complete else
                "is torn: an append was interrupted mid-line; repair removes it")
        return fail(n, n + 1, what, entry.id if entry else _guess_id(tail), torn=True,
                    tail_complete=complete)
    if expect_head is not None and expect_head != GENESIS and expect_head not in declared:
        return fail(n, n, f"the expected head {expect_head[:16]}... is not in the file: entries "
                    f"were removed from the end, or the history was rewritten", prev_id)
    return VerifyReport(path, True, n, prev if n else None, signers=tuple(signers),
                        trusted=trusted_keys is not None)
