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
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Literal, Union

from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator,
                      model_validator)

from ..errors import LadderError, ManifestError
from .paths import data_dir

__all__ = ["Manifest", "SourceSpec", "ColumnsSpec", "ScaleSpec", "ClipSpec", "DeriveSpec",
           "FilterSpec", "CurateSpec", "RunSpec", "PredictSpec", "parse_manifest", "READERS"]

#: Reader names a manifest may use.
READERS = ("csv", "parquet", "jsonl", "wandb", "marin", "olmo")

Scalar = Union[bool, int, float, str]


def _positive():
    return Field(default=None, gt=0, allow_inf_nan=False)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class SourceSpec(_Strict):
    """``[source]``: which reader reads what."""

    reader: Literal["csv", "parquet", "jsonl", "wandb", "marin", "olmo"]
    path: str = Field(min_length=1)
    """A file, a directory or a glob, relative to ``root`` unless absolute."""
    root: Literal["manifest", "data"] = "manifest"
    """``"manifest"``: the manifest's folder; ``"data"``: the published-ladders folder
    (``$DELPHI_DATA_DIR``)."""
    run_id: str | None = None
    """Run-id template from columns when the source has no run column, e.g.
    ``"{model}-lr{peak_lr:g}"`` (``{row}`` = source row). Only column lookups and format specs."""
    duplicates: Literal["error", "drop"] = "error"
    """Rows repeating a (run, step): ``"error"`` (the Ladder refuses), or ``"drop"``: identical
    rows are collapsed and runs with conflicting repeats are left out, each reported."""


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

    @property
    def file(self) -> Path | None:
        """The TOML file this manifest was read from (``None`` if built in memory)."""
        return self._file

    def where(self) -> str:
        """How error messages name this manifest."""
        return str(self._file) if self._file else f"manifest {self.name!r}"

    def data_path(self) -> Path:
        """``source.path`` resolved against its root.

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
        base = self._file.parent if self._file else Path.cwd()
        return base / path


def _describe(error: dict) -> str:
    where = ".".join(str(p) for p in error["loc"]) or "(top level)"
    if error["type"] == "extra_forbidden":
        return f"unknown key {where!r}"
    if error["type"] == "missing":
        return f"missing key {where!r}"
    return f"{where}: {error['msg']}"


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
        Not valid TOML, or not a valid manifest (see :func:`parse_manifest`).
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise LadderError(f"manifest not found: {path}")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{path}: not valid TOML: {exc}") from None
    return parse_manifest(data, file=path.resolve())
