"""TOML ladder manifests: where a ladder's data is and how to read it, declaratively.

A manifest names the data (``[source]``), maps its columns to the canonical ones
(``[columns]``, ``[scale]``), builds run ids and derived columns, filters and curates rows
(every dropped row is reported as an :class:`~delphi.ladder.Exclusion`), sets per-run
constants and may carry defaults for ``delphi predict``. Nothing in it is evaluated as code.
Example::

    name = "epoch-chinchilla"
    description = "Chinchilla's 245 final runs as extracted by Besiroglu et al. 2024"
    citation = "Hoffmann et al. 2022; Besiroglu et al. 2024, arXiv:2404.10102"
    metric = "MassiveText train loss"

    [source]
    reader = "csv"                    # csv | parquet | jsonl | wandb | marin | olmo
    path = "epoch_chinchilla/svg_extracted_data.csv"
    root = "data"                     # "data": $DELPHI_DATA_DIR; "manifest" (default): this folder
    run_id = "N{Model Size:.3g}-C{Training FLOP:.2g}-r{row}"

    [columns]                         # canonical = source column
    params = "Model Size"
    flops = "Training FLOP"

    [derive]
    tokens_from_flops = true          # D = C / (6 N)

    [[filters]]                       # keep rows where the condition holds
    column = "dataset"
    equals = "rw"                     # or not_equals, in, not_in, contains, not_contains, min, max

    [curate]
    drop_highest_loss = 5
    reason = "..."

    [[runs]]                          # per-run constants, by run-id regex (full match)
    match = "d2048"
    fraction = 0.8

    [predict]                         # defaults for `delphi predict`
    law = "power"
    target_flops = 2.61e24
    fixed = {E = 1.5}

Manifests are untrusted input (a manifest from elsewhere must not read arbitrary files):

* ``[source] path`` must resolve, symlinks resolved first, inside the manifest's folder or the
  published-ladders folder (``$DELPHI_DATA_DIR``). Absolute paths and ``..`` that lead
  elsewhere, and files or folders reached through symlinks that lead elsewhere, are refused
  unless the caller passes ``allow_outside_paths=True`` (CLI ``--allow-outside-paths``).
* Globs are bounded: at most :data:`MAX_SOURCE_FILES` files, at most
  :data:`MAX_WALK_ENTRIES` directory entries examined while expanding a glob or listing a
  folder, no glob whose fixed part is the filesystem root (``/**/*.csv``), no ``..`` after
  a wildcard, and no ``**`` (or symlinked folder) leading out of the allowed folders.
* ``run_id`` templates are checked when the manifest is parsed: ``{column}`` or
  ``{column:spec}`` only, a standard format spec with a width of at most
  :data:`MAX_RUN_ID_WIDTH` and a precision of at most :data:`MAX_RUN_ID_PRECISION`, at most
  :data:`MAX_RUN_ID_FIELDS` fields, and ids of at most :data:`MAX_RUN_ID_CHARS` characters
  (the template's text and widths when parsed, every id when built).
* A data file that is not a table of the expected format is refused without showing any of
  its content (see :func:`delphi.readers._pipeline.build_ladder`).
"""

from __future__ import annotations

import fnmatch
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Union

from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator,
                      model_validator)

from ...core.text import not_utf8
from ...errors import LadderError, ManifestError, option
from ..schedules import Schedule
from .paths import data_dir, default_data_dir

__all__ = ["Manifest", "SourceSpec", "ColumnsSpec", "ScaleSpec", "ClipSpec", "DeriveSpec",
           "FilterSpec", "CurateSpec", "RunSpec", "PredictSpec", "SourceFiles", "parse_manifest",
           "parse_run_id_template", "READERS", "MAX_SOURCE_FILES", "MAX_WALK_ENTRIES",
           "MAX_RUN_ID_WIDTH", "MAX_RUN_ID_PRECISION", "MAX_RUN_ID_FIELDS", "MAX_RUN_ID_CHARS"]

#: Reader names a manifest may use.
READERS = ("csv", "parquet", "jsonl", "wandb", "marin", "olmo")

#: Most files one manifest source may name (a folder or a glob); the largest published ladder
#: has about 200.
MAX_SOURCE_FILES = 10_000
#: Most directory entries examined while listing a source folder or expanding a glob, so a
#: glob over a huge tree (or a symlink loop) stops early with an error instead of walking it.
MAX_WALK_ENTRIES = 200_000
#: Largest width in a ``run_id`` format spec (``{row:99999999}`` would build 100 MB per id).
MAX_RUN_ID_WIDTH = 64
#: Largest precision in a ``run_id`` format spec (digits of a float, characters of a string).
MAX_RUN_ID_PRECISION = 32
#: Most ``{column}`` fields in a ``run_id`` template (the widest published template has 4).
MAX_RUN_ID_FIELDS = 16
#: Longest run id a template may build, in characters: checked on the template (its text
#: plus its fields' widths) and on every id built (a string cell may be longer than a width).
MAX_RUN_ID_CHARS = 256

_FIELD = re.compile(r"\{([^{}:]*)(?::([^{}]*))?\}")
# Python's format-spec mini-language:
# [[fill]align][sign][z][#][0][width][grouping][.precision][type]
_FORMAT_SPEC = re.compile(r"(?:(?P<fill>.)?(?P<align>[<>=^]))?(?P<sign>[-+ ])?z?#?0?"
                          r"(?P<width>\d+)?[,_]?(?:\.(?P<precision>\d+))?[bcdeEfFgGnosxX%]?",
                          re.DOTALL)
_MAGIC = re.compile(r"[*?[]")


def parse_run_id_template(template: str) -> list[str | tuple[str, str]]:
    """Split a run-id template into literal text and ``(column, format spec)`` fields.

    ``"N{Model Size:.3g}-r{row}"`` -> ``["N", ("Model Size", ".3g"), "-r", ("row", ""), ""]``.
    Only ``{column}`` and ``{column:spec}`` are allowed: no ``!r`` conversions, no attribute
    or index access, no nested fields, and the spec must be a standard format spec
    (``[[fill]align][sign][z][#][0][width][grouping][.precision][type]``) with a width of at
    most :data:`MAX_RUN_ID_WIDTH` and a precision of at most :data:`MAX_RUN_ID_PRECISION`,
    at most :data:`MAX_RUN_ID_FIELDS` fields, and text plus widths of at most
    :data:`MAX_RUN_ID_CHARS` characters, so one id stays short whatever the template. Whether the columns exist is checked
    against the data (:func:`delphi.readers._pipeline.format_run_ids`) before any id is built.

    Raises
    ------
    ValueError
        A stray brace, an empty field, no field at all, a spec that is not a format spec,
        a width/precision over the limits (the message names the field), too many fields, or
        text and widths over :data:`MAX_RUN_ID_CHARS`.
    """
    parts: list[str | tuple[str, str]] = []
    pos = 0
    for m in _FIELD.finditer(template):
        parts.append(template[pos:m.start()])
        name, spec = m.group(1), m.group(2) or ""
        field = m.group(0)
        if not name.strip():
            raise ValueError(f"field {field!r} names no column")
        if name.strip() != name:
            raise ValueError(f"field {field!r}: column names are used as written, without "
                             "surrounding spaces")
        form = _FORMAT_SPEC.fullmatch(spec)
        if form is None:
            raise ValueError(f"field {field!r}: {spec!r} is not a format spec "
                             "([[fill]align][sign][#][0][width][,][.precision][type])")
        width, precision = form.group("width"), form.group("precision")
        if width is not None and int(width) > MAX_RUN_ID_WIDTH:
            raise ValueError(f"field {field!r}: width {int(width)} is over the limit of "
                             f"{MAX_RUN_ID_WIDTH}")
        if precision is not None and int(precision) > MAX_RUN_ID_PRECISION:
            raise ValueError(f"field {field!r}: precision {int(precision)} is over the limit "
                             f"of {MAX_RUN_ID_PRECISION}")
        parts.append((name, spec))
        pos = m.end()
        if len(parts) // 2 > MAX_RUN_ID_FIELDS:     # parts alternate text, field
            raise ValueError(f"more than {MAX_RUN_ID_FIELDS} fields; a run id needs a few")
    parts.append(template[pos:])
    if any(isinstance(p, str) and ("{" in p or "}" in p) for p in parts):
        raise ValueError("a stray brace (fields are {column} or {column:spec}; no nesting)")
    if not any(isinstance(p, tuple) for p in parts):
        raise ValueError("it names no column")
    # The shortest id the template can build: its text plus each field's width.
    least = sum(len(p) if isinstance(p, str) else
                int(_FORMAT_SPEC.fullmatch(p[1]).group("width") or 0) for p in parts)
    if least > MAX_RUN_ID_CHARS:
        raise ValueError(f"it builds ids of at least {least:,} characters; the limit is "
                         f"{MAX_RUN_ID_CHARS}")
    return parts

def quote_template(template: str, limit: int = 80) -> str:
    """``repr`` of a run-id template for messages, cut after ``limit`` characters (a template
    may be megabytes long)."""
    if len(template) <= limit:
        return repr(template)
    return f"{template[:limit]!r}... ({len(template):,} characters)"


Scalar = Union[bool, int, float, str]


def _positive():
    return Field(default=None, gt=0, allow_inf_nan=False)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class SourceSpec(_Strict):
    """``[source]``: which reader reads what."""

    reader: Literal["csv", "parquet", "jsonl", "wandb", "marin", "olmo"]
    path: str = Field(min_length=1)
    """A file, a directory or a glob, relative to ``root`` unless absolute; it must stay inside
    the manifest's folder or the data directory (see the module docstring)."""
    root: Literal["manifest", "data"] = "manifest"
    """``"manifest"``: the manifest's folder; ``"data"``: the published-ladders folder
    (``$DELPHI_DATA_DIR``)."""
    run_id: str | None = None
    """Run-id template from columns when the source has no run column, e.g.
    ``"{model}-lr{peak_lr:g}"`` (``{row}`` = source row). Only column lookups and format specs."""
    duplicates: Literal["error", "drop"] = "error"
    """Rows repeating a (run, step): ``"error"`` (the Ladder refuses), or ``"drop"``: identical
    rows are collapsed and runs with conflicting repeats are left out, each reported."""

    @field_validator("path")
    @classmethod
    def _no_nul(cls, value: str) -> str:
        # TOML allows "\u0000"; the OS refuses it with a bare ValueError at the first lookup.
        if "\x00" in value:
            raise ValueError(f"{value!r} contains a NUL character (\\x00): no file can be "
                             f"named so")
        return value

    @field_validator("run_id")
    @classmethod
    def _template(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_run_id_template(value)
            except ValueError as exc:
                raise ValueError(f"run_id template {quote_template(value)}: {exc}") from None
        return value


class ColumnsSpec(_Strict):
    """``[columns]``: canonical column = source column."""

    run: str | None = None
    params: str | None = None
    tokens: str | None = None
    flops: str | None = None
    loss: str | None = None
    step: str | None = None
    lr: str | None = None
    peak_lr: str | None = None
    batch_size: str | None = None
    active_params: str | None = None
    final: str | None = None
    fraction: str | None = None
    total_steps: str | None = None
    status: str | None = None


class ScaleSpec(_Strict):
    """``[scale]``: factor applied to a canonical column after renaming (GFLOPs -> 1e9)."""

    params: float | None = _positive()
    tokens: float | None = _positive()
    flops: float | None = _positive()
    loss: float | None = _positive()
    step: float | None = _positive()
    lr: float | None = _positive()
    peak_lr: float | None = _positive()
    batch_size: float | None = _positive()
    active_params: float | None = _positive()


class ClipSpec(_Strict):
    """``[clip]``: ``column = [low, high]``; values outside are clipped and the fact reported."""

    fraction: tuple[float, float] | None = None
    lr: tuple[float, float] | None = None
    step: tuple[float, float] | None = None


class DeriveSpec(_Strict):
    """``[derive]``: columns computed from others."""

    tokens_from_flops: bool = False
    """D = C / (6 N), for datasets that give only N and C (Epoch's convention)."""


class FilterSpec(_Strict):
    """One ``[[filters]]`` entry: keep the rows where every given condition holds.

    NaN fails every condition. Dropped rows are reported as one summary exclusion, or one per
    run with ``per_run = true``.
    """

    column: str
    equals: Scalar | None = None
    not_equals: Scalar | None = None
    in_: list[Scalar] | None = Field(default=None, alias="in")
    not_in: list[Scalar] | None = None
    contains: str | None = None
    not_contains: str | None = None
    min: float | None = None
    max: float | None = None
    reason: str | None = None
    per_run: bool = False

    @model_validator(mode="after")
    def _has_condition(self) -> "FilterSpec":
        if not self.conditions():
            raise ValueError("a filter needs a condition: equals, not_equals, in, not_in, "
                             "contains, not_contains, min or max")
        return self

    def conditions(self) -> list[tuple[str, object]]:
        """``[(operator, value)]`` of the conditions set, operators named as in TOML."""
        ops = ("equals", "not_equals", "in_", "not_in", "contains", "not_contains", "min", "max")
        return [(op.rstrip("_"), getattr(self, op)) for op in ops if getattr(self, op) is not None]


class CurateSpec(_Strict):
    """``[curate]``: drop the K highest-loss points (after filters), each reported with the reason."""

    drop_highest_loss: int = Field(ge=0)
    reason: str = Field(min_length=1)


class RunSpec(_Strict):
    """One ``[[runs]]`` entry: constants for every row of the runs whose id fully matches ``match``."""

    match: str
    params: float | None = _positive()
    active_params: float | None = _positive()
    peak_lr: float | None = _positive()
    batch_size: float | None = _positive()
    fraction: float | None = Field(default=None, gt=0, le=1)
    final: bool | None = None
    status: str | None = None
    """The runs' state, e.g. ``"crashed"`` (see :mod:`delphi.runstate`)."""

    @field_validator("match")
    @classmethod
    def _regex(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
        return value

    def values(self) -> dict[str, float | bool]:
        """The constants set (canonical column -> value)."""
        return {k: v for k, v in self.model_dump(exclude={"match"}).items() if v is not None}


class PredictSpec(_Strict):
    """``[predict]``: defaults for ``delphi predict`` on this ladder (CLI flags override)."""

    law: str | None = None
    target_flops: float | None = _positive()
    target_params: float | None = _positive()
    target_tokens: float | None = _positive()
    target_name: str | None = None
    fixed: dict[str, float] = Field(default_factory=dict)
    """Law parameters held fixed, e.g. ``{E = 1.5}``."""
    fit_max_flops: float | None = _positive()


class Manifest(_Strict):
    """A parsed ladder manifest. Build the ladder with :func:`delphi.readers.load_ladder`."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
    description: str = Field(min_length=1)
    citation: str = ""
    notes: str = ""
    metric: str = "loss"
    """Human name of the eval metric in ``loss``."""
    unit: Literal["nats/token", "bits/byte", "bits/token"] = "nats/token"
    source: SourceSpec
    columns: ColumnsSpec = Field(default_factory=ColumnsSpec)
    scale: ScaleSpec = Field(default_factory=ScaleSpec)
    clip: ClipSpec = Field(default_factory=ClipSpec)
    derive: DeriveSpec = Field(default_factory=DeriveSpec)
    filters: list[FilterSpec] = Field(default_factory=list)
    curate: CurateSpec | None = None
    runs: list[RunSpec] = Field(default_factory=list)
    predict: PredictSpec = Field(default_factory=PredictSpec)
    schedule: str | None = None
    """Every run's LR schedule shape, e.g. ``"cosine:warmup=50,final=0.1"`` (see
    :meth:`delphi.schedules.Schedule.parse`); each run's ``peak_lr`` and ``total_steps`` fill it in."""

    _file: Path | None = PrivateAttr(default=None)

    @field_validator("schedule")
    @classmethod
    def _schedule_spec(cls, value: str | None) -> str | None:
        # Checked when the manifest is read, as --target-schedule is (a misspelt kind was
        # kept and only the fits that read it would ever fail). Each run's peak LR and length
        # fill it in later; placeholders here check the spec's kind, keys and values alone.
        if value is not None:
            try:
                Schedule.parse(value, peak_lr=1e-3, total_steps=10 ** 9)
            except LadderError as exc:
                raise ValueError(str(exc)) from None
        return value

    @property
    def file(self) -> Path | None:
        """The TOML file this manifest was read from (``None`` if built in memory)."""
        return self._file

    def where(self) -> str:
        """How error messages name this manifest."""
        return str(self._file) if self._file else f"manifest {self.name!r}"

    def data_path(self) -> Path:
        """``source.path`` joined to its root (not checked: see :meth:`source_files`).

        Raises
        ------
        DataDirError
            ``root = "data"`` and the published-ladders folder does not exist.
        """
        path = Path(self.source.path).expanduser()
        if path.is_absolute():
            return path
        if self.source.root == "data":
            return data_dir() / path
        return self._folder() / path

    def _folder(self) -> Path:
        # A manifest built in memory is relative to the working directory.
        return self._file.parent if self._file else Path.cwd()

    def allowed_folders(self) -> list[Path]:
        """The folders this manifest may read from, symlinks resolved: its own folder and the
        published-ladders folder (when it exists)."""
        folders = [Path(os.path.realpath(self._folder()))]
        data = default_data_dir()
        if data.is_dir():
            folders.append(Path(os.path.realpath(data)))
        return folders

    def source_files(self, *, allow_outside_paths: bool = False) -> "SourceFiles":
        """``source.path`` checked as untrusted input, and the files it names.

        The path is the one the readers are given (:meth:`data_path`); ``files`` are the
        files a reader will read there: the file itself, the matching files below a folder
        (the reader's pattern, e.g. ``*.csv``; symlinked folders are not followed, as in
        :meth:`pathlib.Path.rglob`) or the matches of a glob (symlinked folders followed, as
        in :func:`glob.glob`). Each is checked with symlinks resolved.

        Parameters
        ----------
        allow_outside_paths:
            Let the path, a glob's matches or symlinks lead outside the manifest's folder and
            the data directory (CLI ``--allow-outside-paths``). The limits on globs apply
            either way.

        Raises
        ------
        ManifestError
            The path (or a file or folder reached through it) resolves outside the allowed
            folders: the message names the manifest, the key ``[source] path`` and the
            resolved path. A glob anchored at the filesystem root, ``..`` after a wildcard,
            more than :data:`MAX_SOURCE_FILES` files, more than :data:`MAX_WALK_ENTRIES`
            entries examined, or a symlink loop.
        DataDirError
            ``root = "data"`` and the published-ladders folder does not exist.
        """
        path = self.data_path()
        return _SourceWalk(self, path, allow_outside_paths).run()


@dataclass(frozen=True)
class SourceFiles:
    """A manifest's checked source: ``path`` (what the reader is given, as in the manifest
    joined to its root) and ``files`` (every regular file the reader will read there,
    unresolved, sorted; empty when nothing exists there, which the reader reports)."""

    path: Path
    files: tuple[Path, ...]


def _pattern_for(reader: str) -> str:
    # The file pattern each reader looks for below a folder (see delphi.readers.*).
    return "tracker_metrics.jsonl" if reader == "marin" else {
        "parquet": "*.parquet", "jsonl": "*.jsonl"}.get(reader, "*.csv")


class _SourceWalk:
    """Expands a manifest's source the way its reader will, within bounds, checking every
    folder and file against the allowed folders."""

    def __init__(self, manifest: Manifest, path: Path, allow_outside: bool) -> None:
        self.manifest = manifest
        self.path = path
        self.allow_outside = allow_outside
        self.allowed = manifest.allowed_folders()
        self.key = f"{manifest.where()}: [source] path {manifest.source.path!r}"
        self.entries = 0
        self.files: set[Path] = set()

    # -- checks
    def _inside(self, real: Path) -> bool:
        return any(real == root or real.is_relative_to(root) for root in self.allowed)

    def check(self, path: Path, what: str = "resolves to") -> None:
        """Refuse ``path`` when, symlinks resolved, it lies outside the allowed folders."""
        if self.allow_outside:
            return
        real = Path(os.path.realpath(path))
        if not self._inside(real):
            folders = " or ".join(str(f) for f in self.allowed)
            via = "" if what == "resolves to" else f" ({path})"
            raise ManifestError(
                f"{self.key} {what} {real}{via}, outside the folders a manifest may read "
                f"({folders}); a manifest reads only files in its own folder or the data "
                "directory (symlinks resolved). If you trust this manifest, pass "
                + option("allow_outside_paths=True", "--allow-outside-paths"))

    def _count(self, n: int = 1) -> None:
        self.entries += n
        if self.entries > MAX_WALK_ENTRIES:
            raise ManifestError(f"{self.key}: more than {MAX_WALK_ENTRIES:,} directory entries "
                                "examined while looking for its files; point it at a smaller "
                                "folder or a narrower glob")

    def _add(self, file: Path) -> None:
        self.check(file, "names a file that resolves to")
        self.files.add(file)
        if len(self.files) > MAX_SOURCE_FILES:
            raise ManifestError(f"{self.key} names more than {MAX_SOURCE_FILES:,} files (the "
                                "limit for one manifest source); narrow the glob or the folder")

    def _scan(self, folder: Path) -> list[os.DirEntry]:
        try:
            with os.scandir(folder) as it:
                entries = []
                for entry in it:
                    self._count()
                    entries.append(entry)
                return entries
        except OSError:
            return []      # unreadable folders are skipped, as glob and rglob skip them

    # -- the three kinds of source, as delphi.readers._common.resolve_paths tells them apart
    def run(self) -> SourceFiles:
        text = str(self.path)
        if _MAGIC.search(text) and not self.path.exists():
            self._glob(text)
        else:
            self.check(self.path)
            if self.path.is_dir():
                self._folder(self.path, _pattern_for(self.manifest.source.reader))
            elif self.path.is_file():
                self._add(self.path)
        return SourceFiles(self.path, tuple(sorted(self.files)))

    def _folder(self, folder: Path, pattern: str) -> None:
        # As Path.rglob in Python 3.11/3.12: hidden names included, symlinked folders not
        # followed; file symlinks are followed (and so checked).
        stack = [folder]
        while stack:
            here = stack.pop()
            for entry in self._scan(here):
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
                    elif fnmatch.fnmatchcase(entry.name, pattern) and entry.is_file():
                        self._add(Path(entry.path))
                except OSError:
                    continue

    def _glob(self, text: str) -> None:
        parts = Path(text).parts
        first = next(i for i, part in enumerate(parts) if _MAGIC.search(part))
        fixed = Path(*parts[:first]) if first else Path(".")
        if Path(os.path.realpath(fixed)) == Path(os.path.realpath(fixed)).parent:
            raise ManifestError(f"{self.key}: a glob anchored at the filesystem root would "
                                "walk the whole disk; give a folder inside the manifest's "
                                "folder or the data directory")
        if ".." in parts[first:] and not self.allow_outside:
            raise ManifestError(f"{self.key}: '..' after a wildcard can lead out of the "
                                "folders a manifest may read; write the folder without "
                                "wildcards before the '..'")
        self.check(fixed)
        if fixed.is_dir():
            self._match(fixed, parts[first:], (os.path.realpath(fixed),))

    def _match(self, folder: Path, parts: tuple[str, ...], ancestors: tuple[str, ...]) -> None:
        # As glob.glob(recursive=True): names starting with '.' only match a pattern starting
        # with '.', '**' matches zero or more folders (symlinked ones followed, not hidden).
        head, rest = parts[0], parts[1:]
        if head == "**":
            if rest:
                self._match(folder, rest, ancestors)
            for entry in self._scan(folder):
                if entry.name.startswith("."):
                    continue
                self._step(Path(entry.path), parts, ancestors, last=not rest)
            return
        if not _MAGIC.search(head):
            candidate = folder / head
            if os.path.lexists(candidate):
                self._count()
                self._step(candidate, rest, ancestors, last=not rest)
            return
        for entry in self._scan(folder):
            if entry.name.startswith(".") and not head.startswith("."):
                continue
            if fnmatch.fnmatch(entry.name, head):
                self._step(Path(entry.path), rest, ancestors, last=not rest)

    def _step(self, path: Path, rest: tuple[str, ...], ancestors: tuple[str, ...],
              last: bool) -> None:
        try:
            if path.is_dir():
                if not rest:
                    return          # a folder matched by the last component: not a file
                real = os.path.realpath(path)
                if rest[0] == "**" and real in ancestors:    # '**' would recurse forever
                    raise ManifestError(f"{self.key}: the glob meets a symlink loop at {path}")
                self.check(path, "reaches a folder that resolves to")
                self._match(path, rest, ancestors + (real,))
            elif last and path.is_file():
                self._add(path)
        except OSError:
            return


def _describe(error: dict) -> str:
    where = ".".join(str(p) for p in error["loc"]) or "(top level)"
    if error["type"] == "extra_forbidden":
        return f"unknown key {where!r}"
    if error["type"] == "missing":
        return f"missing key {where!r}"
    msg = error["msg"]
    if error["type"] == "value_error" and msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]   # pydantic's prefix says nothing to the reader
    return f"{where}: {msg}"


def parse_manifest(data: dict, *, file: Path | None = None) -> Manifest:
    """Validate a manifest from its parsed TOML.

    Raises
    ------
    ManifestError
        Unknown or missing keys, or bad values; the message names each key and the file.
    """
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        label = str(file) if file else "manifest"
        problems = "; ".join(_describe(e) for e in exc.errors())
        raise ManifestError(f"{label}: {problems}") from None
    manifest._file = file
    return manifest


def read_manifest(path: str | Path) -> Manifest:
    """Read and validate a TOML manifest file.

    Raises
    ------
    LadderError
        The file does not exist.
    ManifestError
        Not UTF-8 text (names the line and byte), not valid TOML, arrays or tables nested
        deeper than Python's parser can follow, or not a valid manifest (see
        :func:`parse_manifest`; a ``[source] path`` with a NUL character is named there).
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise LadderError(f"manifest not found: {path}")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise LadderError(f"cannot read manifest {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        # TOML is UTF-8 by definition; say where, as the data readers do.
        raise ManifestError(f"{not_utf8(path, raw, exc)}; TOML files are UTF-8: save it as "
                            f"UTF-8") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        # tomllib recurses once per nested array or inline table.
        raise ManifestError(f"{path}: arrays or tables nested too deeply to read (a manifest "
                            f"nests a few levels)") from None
    return parse_manifest(data, file=path.resolve())
