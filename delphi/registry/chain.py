"""Verifying a registry file: every line canonical, hashed, chained, unique and consistent."""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping

from pydantic import ValidationError

from ..errors import RegistryError
from .invariants import ChainRules
from .schema import GENESIS, Entry, canonical_json, entry_hash, validation_message
from ..core.text import plural
from .signing import fingerprint, signature_valid

__all__ = ["VerifyReport", "Signer", "verify_bytes", "split_lines", "plural", "check_head",
           "line_problem", "normalized"]

_ID_GUESS = re.compile(rb'"id":"([A-Za-z0-9._:/@+-]{1,80})"')


@dataclass(frozen=True)
class VerifyReport:
    """The result of checking a registry file (:meth:`Registry.verify`).

    ``ok`` is True when every line is a canonical, schema-valid entry whose hash matches its
    content and whose ``prev_hash`` is the previous entry's hash, every entry is one that
    ``register`` or ``score`` could have written where it stands (unique ids, time order, no
    date in the future, ids, numbers and units as the API writes them, outcomes named
    ``ID/outcome-N`` that score an earlier prediction, at most one final outcome per
    prediction: :class:`~delphi.registry.invariants.ChainRules`), and the file ends with a
    newline. Otherwise ``line`` (1-based) and ``id`` name the *first* problem.

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
    fix: str | None = None
    """The entries are intact and only the file's layout changed (CRLF line endings, trailing
    blank lines, a byte-order mark): what :meth:`Registry.repair` does about it."""

    @property
    def repairable(self) -> bool:
        return self.torn or self.fix is not None

    def to_dict(self) -> dict:
        """JSON-ready dict (``delphi registry verify --json``)."""
        return {"path": self.path, "ok": self.ok, "n_entries": self.n_entries, "head": self.head,
                "problem": self.problem, "line": self.line, "id": self.id, "torn": self.torn,
                "repairable": self.repairable, "fix": self.fix, "trusted_keys": self.trusted,
                "signers": [s.to_dict() for s in self.signers]}

    def signer_lines(self) -> list[str]:
        """One line per verified entry naming its signer (``unsigned`` when none)."""
        return [f"{s.line:>5}  {s.id:<40} {s.describe()}" for s in self.signers]

    def __str__(self) -> str:
        if self.ok:
            return (f"{self.path}: OK, {plural(self.n_entries, 'entry', 'entries')}, "
                    f"chain intact"
                    + (f", head {self.head}" if self.head else ""))
        where = f"line {self.line}" + (f" (id {self.id})" if self.id else "")
        hint = (f"; run `delphi registry repair --registry {self.path}` (it keeps a backup)"
                if self.repairable else "")
        done = "verified" if self.fix else "verified before it"
        return (f"{self.path}: FAILED at {where}: {self.problem}{hint} "
                f"[{plural(self.n_entries, 'entry', 'entries')} {done}]")


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


_BOM = b"\xef\xbb\xbf"
_HEAD = re.compile(r"[0-9a-f]{64}")


def check_head(expect_head: str) -> str:
    """A head hash as published (64 hex digits, either case) in lower case.

    Raises
    ------
    RegistryError
        It is not 64 hexadecimal digits (a prefix, a typo, an empty string).
    """
    head = expect_head.strip().lower() if isinstance(expect_head, str) else ""
    if not _HEAD.fullmatch(head):
        shown = repr(expect_head[:20]) + ("..." if len(expect_head) > 20 else "") \
            if isinstance(expect_head, str) else repr(expect_head)
        raise RegistryError(f"expected head {shown} is not a head hash: give all 64 "
                            f"hexadecimal digits printed by `delphi registry head`")
    return head


def line_problem(line: bytes) -> str:
    """Why ``line`` is not a readable entry, in verify's words ("is not valid JSON"...)."""
    if not line.strip():
        return "is empty"
    raw = _loads(line)
    if raw is None:
        if line.startswith(_BOM):
            return ("starts with a byte-order mark (BOM, added by some editors), so it is "
                    "not valid JSON")
        return "is not valid JSON: altered or truncated"
    if not isinstance(raw, dict):
        return "is not a JSON object"
    try:
        Entry.model_validate_json(line)
    except ValidationError as exc:
        return "is not a valid entry: " + validation_message(exc, "entry").removeprefix(
            "invalid entry: ")
    return "is not a valid entry"  # pragma: no cover - only called on a line that failed


def normalized(data: bytes) -> tuple[bytes, str | None]:
    """``data`` with CRLF line endings, trailing blank lines and a leading byte-order mark
    undone, and what was undone (None when nothing was)."""
    done = []
    out = data
    if out.startswith(_BOM):
        out = out[len(_BOM):]
        done.append("removed the byte-order mark (BOM) at the start")
    if _all_crlf(out):
        out = out.replace(b"\r\n", b"\n")
        done.append("converted CRLF line endings (e.g. from git autocrlf) back to LF")
    body = out.rstrip(b" \t\r\n")
    if out.endswith(b"\n") and len(body) + 1 < len(out):
        n = out[len(body) + 1:].count(b"\n")
        out = body + b"\n" if body else b""
        done.append(f"stripped {plural(n, 'trailing blank line')}")
    return out, ("; ".join(done) or None)


def _all_crlf(data: bytes) -> bool:
    """Every line ends with CRLF (as git autocrlf or a Windows editor leaves it); a stray
    ``\r\n`` inside damaged bytes is not a line-ending conversion."""
    return b"\r\n" in data and data.count(b"\n") == data.count(b"\r\n")


def _layout_problem(data: bytes, clean: bytes) -> tuple[int, str]:
    """The first line where ``data`` differs from its normalized form ``clean``, and why."""
    lines = data.split(b"\n")
    if data.startswith(_BOM):
        return 1, "starts with a byte-order mark (BOM, added by some editors)"
    if _all_crlf(data):
        return 1, "has CRLF line endings (e.g. from git autocrlf)"
    n_clean = len(clean.split(b"\n")) - 1
    n_blank = len(lines) - 1 - n_clean
    return n_clean + 1, (f"is blank: the file ends with {plural(n_blank, 'blank line')} "
                         f"(e.g. from `echo >>` or an editor)")


def _loads(line: bytes):
    try:
        return json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None


class Problem(Exception):
    def __init__(self, message: str, id: str | None):
        super().__init__(message)
        self.message, self.id = message, id


def check_line(line: bytes, raw, prev: str) -> Entry:
    """The entry on ``line`` if it is intact and follows ``prev``; else raises Problem."""
    rid = raw.get("id") if isinstance(raw, dict) else None
    rid = rid if isinstance(rid, str) else _guess_id(line)
    if not line.strip():
        raise Problem("is empty", None)
    if raw is None:
        raise Problem(line_problem(line), rid)
    if not isinstance(raw, dict):
        raise Problem("is not a JSON object", rid)
    declared = raw.get("hash")
    try:
        actual = entry_hash(raw)
    except RegistryError:
        raise Problem("holds a non-finite number (NaN or infinity)", rid) from None
    if declared != actual:
        raise Problem("is altered: its content does not match its hash", rid)
    try:
        entry = Entry.model_validate_json(line)
    except ValidationError as exc:
        raise Problem(validation_message(exc, "entry"), rid) from None
    # Compare with the canonical form of what was read (not of the model's dump), so files
    # written before an optional field was added keep verifying.
    if canonical_json(raw).encode("ascii") != line:
        raise Problem("is not in canonical form (whitespace, key order or number format "
                       "changed)", rid)
    if entry.signature is not None:

        if not signature_valid(raw):
            raise Problem(f"has a signature that does not verify with the key it names "
                           f"({fingerprint(entry.signature.key)}): the entry was altered after "
                           f"it was signed, or the signature is forged", rid)
    return entry


def verify_bytes(data: bytes, path: str | Path, expect_head: str | None = None,
                 trusted_keys: Mapping[str, str] | None = None, *,
                 now: datetime | None = None) -> VerifyReport:
    """Check the registry content ``data`` (the bytes of the file at ``path``).

    Parameters
    ----------
    expect_head: a head hash published earlier (64 hex digits, either case); the check fails
        when no entry has it (entries were removed from the end, or the history was
        rewritten).
    now: the time entries may not be dated after (by more than
        :data:`~delphi.registry.invariants.FUTURE_TOLERANCE`); default: this machine's clock.

    A file whose entries are intact but whose layout changed (CRLF line endings, trailing
    blank lines, a byte-order mark) fails with ``fix`` set: :meth:`Registry.repair` undoes it.

    Raises
    ------
    RegistryError
        ``expect_head`` is not 64 hexadecimal digits.
    trusted_keys: ``{public key text: name}`` (:func:`~delphi.registry.signing.
        load_trusted_keys`); when given, an entry that is unsigned or signed by another key
        fails the check. A signature that does not verify fails it in any case.
    """
    path = str(path)
    if expect_head is not None:
        expect_head = check_head(expect_head)
    if now is None:
        now = datetime.now(timezone.utc)
    clean, fix = normalized(data)
    if fix is not None:
        inner = verify_bytes(clean, path, expect_head, trusted_keys, now=now)
        line_no, what = _layout_problem(data, clean)
        if inner.ok:
            return dataclasses.replace(
                inner, ok=False, line=line_no, id=None, fix=fix,
                problem=f"{what}; the entries are intact otherwise")
        if _all_crlf(data) or data.startswith(_BOM):
            # Report the real damage (line numbers are unchanged by the conversion), not
            # every line as "not canonical".
            return dataclasses.replace(inner, torn=False, tail_complete=False,
                                       problem=f"{inner.problem}; the file also {what}")
    seen: dict[bytes, int] = {}
    signers: list[Signer] = []
    lines, tail = split_lines(data)
    raws = [_loads(line) for line in lines]
    # Where each declared hash sits, to tell a reordering from a deletion.
    declared = {r["hash"]: i for i, r in enumerate(raws, 1)
                if isinstance(r, dict) and isinstance(r.get("hash"), str)}
    prev, prev_id = GENESIS, None
    rules = ChainRules(now)

    def fail(n: int, line_no: int, message: str, id: str | None, **kw) -> VerifyReport:
        return VerifyReport(path, False, n, prev if n else None, message, line_no, id, **kw,
                            signers=tuple(signers), trusted=trusted_keys is not None)

    for i, (line, raw) in enumerate(zip(lines, raws), 1):
        try:
            entry = check_line(line, raw, prev)
        except Problem as p:
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
        problem = rules.problem(entry, i)
        if problem is not None:
            return fail(i - 1, i, problem, entry.id)
        key = None if entry.signature is None else "ed25519:" + entry.signature.key
        if trusted_keys is not None:
            if key is None:
                return fail(i - 1, i, "is not signed, but trusted keys were given: anyone with "
                            "write access could have appended it", entry.id)
            if key not in trusted_keys:

                return fail(i - 1, i, f"is signed by {fingerprint(key)}, which is not one of the "
                            f"trusted keys", entry.id)
        signers.append(Signer(i, entry.id, key, (trusted_keys or {}).get(key)))
        rules.add(entry, i)
        prev, prev_id = entry.hash, entry.id
    n = len(lines)
    if tail:
        try:
            entry = check_line(tail, _loads(tail), prev)
            # Complete only if the API could have written it there; otherwise it is removed.
            complete = entry.prev_hash == prev and rules.problem(entry, n + 1) is None
        except Problem:
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
