"""Readers, manifest features and load_ladder errors, on small synthetic files in tmp_path."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from delphi.errors import DataDirError, LadderError, ManifestError
from delphi.readers import (list_ladders, load_ladder, load_manifest, read_csv, read_marin,
                            read_olmo, read_wandb)

TIDY = pd.DataFrame({
    "run": ["a", "a", "b", "b"],
    "step": [100, 200, 100, 200],
    "params": [1e6, 1e6, 4e6, 4e6],
    "tokens": [1e8, 2e8, 1e8, 2e8],
    "loss": [4.0, 3.5, 3.6, 3.2],
    "seed": [1, 1, 2, 2],
})


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


# ---------------------------------------------------------------- tidy tables
def test_tidy_csv_loads_with_6nd_flops_and_keeps_metadata(tmp_path):
    path = tmp_path / "tiny.csv"
    TIDY.to_csv(path, index=False)
    ladder = load_ladder(path)
    assert ladder.name == "tiny" and ladder.runs == ["a", "b"] and len(ladder) == 4
    assert ladder.flops_source == "6ND"
    assert np.allclose(ladder.table["flops"], 6 * ladder.table["params"] * ladder.table["tokens"])
    assert ladder.table["seed"].tolist() == [1, 1, 2, 2]
    assert ladder.table["row"].tolist() == [0, 1, 2, 3]


def test_parquet_and_jsonl_give_the_same_ladder_as_csv(tmp_path):
    TIDY.to_csv(tmp_path / "t.csv", index=False)
    TIDY.to_parquet(tmp_path / "t.parquet", index=False)
    TIDY.to_json(tmp_path / "t.jsonl", orient="records", lines=True)
    prints = {s: load_ladder(tmp_path / f"t{s}").fingerprint() for s in (".csv", ".parquet", ".jsonl")}
    assert len(set(prints.values())) == 1, prints


def test_column_mapping_renames_and_scales(tmp_path):
    write(tmp_path / "raw.csv", """
        model,N,D,gflops,val,lr
        m1,1000000,100000000,600000,4.1,0.003
        m2,4000000,100000000,2400000,3.7,0.002
    """)
    table = read_csv(tmp_path / "raw.csv", scale={"flops": 1e9}, columns={
        "run": "model", "params": "N", "tokens": "D", "flops": "gflops", "loss": "val",
        "peak_lr": "lr"})
    ladder = table.to_ladder(name="raw")
    assert ladder.table["flops"].tolist() == [6e14, 2.4e15]
    assert ladder.table["peak_lr"].tolist() == [0.003, 0.002]
    assert "lr" not in ladder.table.columns         # the raw `lr` was the peak, not per-step
    assert table.renamed["model"] == "run"


def test_unmapped_source_column_with_a_canonical_name_is_kept_aside(tmp_path):
    write(tmp_path / "t.csv", """
        run,params,tokens,loss,val_loss
        a,1000000,100000000,9.9,3.5
    """)
    ladder = load_ladder(tmp_path / "t.csv", metric="val_loss")
    assert ladder.metric == "val_loss"
    assert ladder.table["loss"].tolist() == [3.5]
    assert ladder.table["source:loss"].tolist() == [9.9]


def test_unknown_metric_lists_the_loss_like_columns(tmp_path):
    TIDY.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(LadderError, match=r"column 'bpb' \(for loss\) not found.*loss-like columns: loss"):
        load_ladder(tmp_path / "t.csv", metric="bpb")


def test_directory_and_glob_stack_files(tmp_path):
    (tmp_path / "runs").mkdir()
    TIDY.iloc[:2].to_csv(tmp_path / "runs" / "a.csv", index=False)
    TIDY.iloc[2:].to_csv(tmp_path / "runs" / "b.csv", index=False)
    for path in (tmp_path / "runs", tmp_path / "runs" / "*.csv"):
        ladder = read_csv(path).to_ladder()
        assert ladder.runs == ["a", "b"]
        assert set(ladder.table["source_file"]) == {"a.csv", "b.csv"}


# ---------------------------------------------------------------- W&B exports
def test_wandb_export_defaults_and_reports_rows_without_the_metric(tmp_path):
    write(tmp_path / "export.csv", """
        Name,parameter_count,throughput/total_tokens,throughput/total_gflops,eval/paloma/macro_loss
        run-a,1000000,100000000,600000,3.9
        run-b,2000000,100000000,1200000,
        run-c,4000000,100000000,2400000,3.5
    """)
    table = read_wandb(tmp_path / "export.csv")
    ladder = table.to_ladder()
    assert ladder.runs == ["run-a", "run-c"]
    assert ladder.table["flops"].tolist() == [6e14, 2.4e15]          # GFLOPs x 1e9
    assert ladder.metric == "eval/paloma/macro_loss"
    [excl] = ladder.exclusions
    assert excl.run == "run-b" and "no eval/paloma/macro_loss value" in excl.reason


def test_wandb_history_with_a_custom_mapping_drops_sparse_rows(tmp_path):
    write(tmp_path / "hist.csv", """
        _step,run_name,n,tok,eval/c4/loss
        10,r,1000,1000000,
        20,r,1000,2000000,5.0
        30,r,1000,3000000,
        40,r,1000,4000000,4.5
    """)
    table = read_wandb(tmp_path / "hist.csv",
                       columns={"run": "run_name", "params": "n", "tokens": "tok"},
                       metric="eval/c4/loss")
    ladder = table.to_ladder()
    assert ladder.table["step"].tolist() == [20.0, 40.0]
    [excl] = ladder.exclusions
    assert excl.run == "r" and "2 of its 4 rows have no eval/c4/loss value" in excl.reason


# ---------------------------------------------------------------- Marin tracker_metrics.jsonl
def _marin_run(folder: Path, config: dict, summary: dict) -> Path:
    folder.mkdir(parents=True)
    path = folder / "tracker_metrics.jsonl"
    path.write_text(json.dumps({"config": config, "summary": summary}) + "\n")
    return path


def _summary(n: float, d: float, loss: float | None) -> dict:
    out = {"parameter_count": n, "throughput/total_tokens": d,
           "throughput/total_gflops": 6 * n * d / 1e9, "eval/paloma/c4_en/bpb": 1.0}
    if loss is not None:
        out["eval/paloma/macro_loss"] = loss
    return out


@pytest.fixture
def marin_dir(tmp_path) -> Path:
    root = tmp_path / "checkpoints"
    _marin_run(root / "iso-a-123abc", {"name": "iso-a", "trainer": {"train_batch_size": 64}},
               _summary(1e8, 2e9, 3.6))
    _marin_run(root / "iso-b-456def", {"trainer": {"train_batch_size": 128}},
               _summary(2e8, 4e9, 3.3))
    _marin_run(root / "iso-c-789aaa", {"trainer": {"train_batch_size": 128}},
               _summary(4e8, 8e9, None))
    return root


def test_marin_reader_reads_a_directory_tree(marin_dir):
    table = read_marin(marin_dir)
    ladder = table.to_ladder()
    # run id from the config's `name`, else the folder name
    assert ladder.runs == ["iso-a", "iso-b-456def"]
    assert ladder.table["trainer.train_batch_size"].tolist() == [64, 128]
    assert np.allclose(ladder.table["flops"], 6 * ladder.table["params"] * ladder.table["tokens"])
    [excl] = ladder.exclusions
    assert excl.run == "iso-c-789aaa" and "eval/paloma/macro_loss" in excl.reason


def test_marin_reader_takes_a_glob_a_file_and_a_metric(marin_dir):
    assert len(read_marin(marin_dir / "iso-[ab]*" / "tracker_metrics.jsonl").frame) == 2
    one = read_marin(marin_dir / "iso-a-123abc" / "tracker_metrics.jsonl").to_ladder()
    assert one.runs == ["iso-a"]
    bpb = read_marin(marin_dir, metric="eval/paloma/c4_en/bpb").to_ladder()
    assert bpb.table["loss"].tolist() == [1.0, 1.0, 1.0] and bpb.exclusions == []


def test_marin_reader_rejects_a_bad_line(tmp_path):
    path = write(tmp_path / "r" / "tracker_metrics.jsonl", '{"config": {}, "summary": {}}\nnot json\n')
    with pytest.raises(LadderError, match=r"tracker_metrics.jsonl, line 2: not valid JSON"):
        read_marin(path)


# ---------------------------------------------------------------- OLMo ladder CSVs
OLMO_HEADER = ("_step,throughput/total_tokens,optim/learning_rate_group0,learning_rate_peak,"
               "batch_size_in_tokens,throughput/total_training_Gflops,"
               "eval/c4_en-validation/CrossEntropyLoss,eval/pile-validation/CrossEntropyLoss")


def _olmo_file(path: Path, rows: list[tuple]) -> None:
    lines = [OLMO_HEADER] + [",".join("" if v is None else str(v) for v in r) for r in rows]
    write(path, "\n".join(lines) + "\n")


@pytest.fixture
def olmo_dir(tmp_path) -> Path:
    d = tmp_path / "ladder-runs"
    _olmo_file(d / "190M-1xC.csv", [(100, 5.2e7, 4e-4, 1e-3, 524288, 7e7, 4.0, 4.4),
                                    (200, 1.05e8, 1e-4, 1e-3, 524288, 1.4e8, 3.7, 4.1)])
    _olmo_file(d / "190M-2xC.csv", [(100, 5.2e7, 4e-4, 1e-3, 524288, 7e7, 4.0, 4.4),
                                    (200, 1.05e8, 3e-4, 1e-3, 524288, 1.4e8, None, None),
                                    (400, 2.1e8, 1e-4, 1e-3, 524288, 2.8e8, 3.5, 3.9)])
    return d


def test_olmo_reader_maps_columns_and_marks_final(olmo_dir):
    table = read_olmo(olmo_dir)
    ladder = table.to_ladder()
    t = ladder.table
    assert ladder.runs == ["190M-1xC", "190M-2xC"]
    assert t.loc[t["final"], "step"].tolist() == [200.0, 400.0]
    assert t["flops"].max() == pytest.approx(2.8e17)                   # GFLOPs x 1e9
    assert set(t["peak_lr"]) == {1e-3} and set(t["batch_size"]) == {524288.0}
    assert t["lr"].tolist() == [4e-4, 1e-4, 4e-4, 1e-4]
    assert ladder.metric == "eval/c4_en-validation/CrossEntropyLoss"
    [excl] = ladder.exclusions
    assert excl.run == "190M-2xC" and "1 of its 3 rows" in excl.reason


def test_olmo_reader_accepts_an_eval_set_name(olmo_dir):
    ladder = read_olmo(olmo_dir / "190M-1xC.csv", metric="pile").to_ladder()
    assert ladder.table["loss"].tolist() == [4.4, 4.1]


# ---------------------------------------------------------------- manifests (synthetic)
POINTS = """
    model,N,C,loss,dataset,outlier
    s,1.0e6,6.0e15,5.0,rw,false
    m,4.0e6,2.4e16,4.2,rw,false
    l,1.6e7,9.6e16,3.6,rw,true
    xl,6.4e7,3.84e17,3.1,rw,false
    s,1.0e6,6.0e15,5.1,owt2,false
    m,4.0e6,2.4e16,4.4,owt2,false
"""


def test_manifest_builds_ids_derives_tokens_filters_and_curates(tmp_path):
    write(tmp_path / "points.csv", POINTS)
    path = write(tmp_path / "m.toml", """
        name = "toy"
        description = "toy points"
        metric = "toy loss"

        [source]
        reader = "csv"
        path = "points.csv"
        run_id = "{dataset}-{model}-N{N:.2g}"

        [columns]
        params = "N"
        flops = "C"

        [derive]
        tokens_from_flops = true

        [[filters]]
        column = "dataset"
        equals = "rw"
        reason = "one training set"

        [[filters]]
        column = "outlier"
        equals = false
        per_run = true
        reason = "flagged"

        [curate]
        drop_highest_loss = 1
        reason = "worst point"

        [[runs]]
        match = "rw-xl-.*"
        peak_lr = 0.001
    """)
    ladder = load_ladder(path)
    assert ladder.name == "toy" and ladder.metric == "toy loss"
    assert ladder.runs == ["rw-m-N4e+06", "rw-xl-N6.4e+07"]
    assert np.allclose(ladder.table["tokens"], ladder.table["flops"] / (6 * ladder.table["params"]))
    assert ladder.table.set_index("run")["peak_lr"].isna().tolist() == [True, False]
    reasons = [(e.run, e.reason) for e in ladder.exclusions]
    assert reasons[0] == ("*", "filter dataset == 'rw' dropped 2 of 6 rows: one training set")
    assert reasons[1] == ("rw-l-N1.6e+07", "filter outlier == False: run dropped: flagged")
    assert reasons[2][0] == "rw-s-N1e+06" and reasons[2][1].startswith("curation: loss 5 is #1")
    assert len(reasons) == 3


@pytest.mark.parametrize("condition, kept", [
    ('in = ["m", "xl"]', ["m", "m", "xl"]),
    ('not_in = ["m", "xl"]', ["l", "s", "s"]),
    ('contains = "l"', ["l", "xl"]),
    ('not_contains = "l"', ["m", "m", "s", "s"]),
    ('not_equals = "s"', ["l", "m", "m", "xl"]),
])
def test_manifest_filter_operators(tmp_path, condition, kept):
    write(tmp_path / "points.csv", POINTS)
    path = write(tmp_path / "m.toml", f"""
        name = "ops"
        description = "filter operators"
        [source]
        reader = "csv"
        path = "points.csv"
        run_id = "{{dataset}}-{{model}}"
        [columns]
        params = "N"
        flops = "C"
        [[filters]]
        column = "model"
        {condition}
    """)
    ladder = load_ladder(path)
    assert sorted(ladder.table["model"]) == kept
    assert ladder.exclusions[0].run == "*" and "dropped" in ladder.exclusions[0].reason


def test_manifest_min_max_filter_on_a_renamed_column(tmp_path):
    write(tmp_path / "points.csv", POINTS)
    path = write(tmp_path / "m.toml", """
        name = "range"
        description = "min and max"
        [source]
        reader = "csv"
        path = "points.csv"
        run_id = "{dataset}-{model}"
        [columns]
        params = "N"
        flops = "C"
        [[filters]]
        column = "C"          # the source name of flops works too
        min = 1e16
        max = 1e17
    """)
    ladder = load_ladder(path)
    assert sorted(ladder.runs) == ["owt2-m", "rw-l", "rw-m"]
    assert ladder.exclusions[0].reason == "filter C >= 1e+16 and C <= 1e+17 dropped 3 of 6 rows"


def test_manifest_constants_clip_duplicates_and_predict(tmp_path):
    write(tmp_path / "curves.csv", """
        model,step,N,D,loss,frac
        a,1,1e6,1e8,5.0,0.5
        a,2,1e6,2e8,4.0,1.02
        a,2,1e6,2e8,4.0,1.02
        b,1,2e6,1e8,4.5,0.5
        b,1,2e6,1e8,4.6,0.5
        c,1,4e6,1e8,4.0,0.8
    """)
    path = write(tmp_path / "m.toml", """
        name = "curves"
        description = "toy curves"
        [source]
        reader = "csv"
        path = "curves.csv"
        duplicates = "drop"
        [columns]
        run = "model"
        params = "N"
        tokens = "D"
        fraction = "frac"
        [clip]
        fraction = [0.0, 1.0]
        [[runs]]
        match = "c"
        final = false
        [predict]
        law = "power"
        target_flops = 1e21
        target_name = "big"
        fixed = {E = 1.5}
        fit_max_flops = 1e19
    """)
    with pytest.warns(UserWarning, match=r"clipped fraction of 2 row\(s\) into \[0, 1\]"):
        ladder = load_ladder(path)
    assert ladder.runs == ["a", "c"]
    assert ladder.table["fraction"].max() == 1.0
    excl = {e.run: e.reason for e in ladder.exclusions}
    assert "row 2 repeats row 1 exactly" in excl["a"]
    assert excl["b"].startswith("ambiguous: the source has 2 different rows for step 1 (rows 3, 4)")
    finals, left_out = ladder.final_points()
    assert finals["run"].tolist() == ["a"] and "unfinished" in left_out[0].reason
    predict = load_manifest(path).predict
    assert (predict.law, predict.target_flops, predict.fixed) == ("power", 1e21, {"E": 1.5})


def test_manifest_root_data_uses_the_data_dir(tmp_path, monkeypatch):
    TIDY.to_csv(tmp_path / "published.csv", index=False)
    path = write(tmp_path / "elsewhere" / "m.toml", """
        name = "pub"
        description = "published"
        [source]
        reader = "csv"
        path = "published.csv"
        root = "data"
    """)
    monkeypatch.setenv("DELPHI_DATA_DIR", str(tmp_path))
    assert load_ladder(path).runs == ["a", "b"]


@pytest.mark.parametrize("extra, message", [
    ('[[runs]]\nmatch = "zz.*"\nparams = 5', r"\[\[runs\]\] match 'zz.\*' matches no run"),
    ('[[runs]]\nmatch = "a"\nparams = 5', r"sets params = 5.0, but the source already has 1000000.0"),
    ('[[filters]]\ncolumn = "colour"\nequals = "red"', r"a filter names column 'colour'.*columns found: run"),
    ('run_id = "{run}-{seed}"\n[columns]\nrun = "run"',
     r"give either \[columns\] run or \[source\] run_id"),
])
def test_manifest_mistakes_are_manifest_errors(tmp_path, extra, message):
    TIDY.to_csv(tmp_path / "t.csv", index=False)
    path = write(tmp_path / "m.toml", 'name = "t"\ndescription = "t"\n'
                 '[source]\nreader = "csv"\npath = "t.csv"\n' + extra + "\n")
    with pytest.raises(ManifestError, match=message):
        load_ladder(path)


def test_run_id_template_with_an_unknown_column(tmp_path):
    write(tmp_path / "points.csv", POINTS)
    path = write(tmp_path / "m.toml", """
        name = "t"
        description = "t"
        [source]
        reader = "csv"
        path = "points.csv"
        run_id = "{model}-{width}"
    """)
    with pytest.raises(ManifestError, match=r"run_id names column 'width'.*columns found: model, N, C"):
        load_ladder(path)


# ---------------------------------------------------------------- load_ladder errors
def test_unknown_ladder_name_lists_the_known_ones():
    with pytest.raises(LadderError, match=r"unknown ladder 'no-such-ladder'; known ladders: .*"
                                          r"epoch-chinchilla.*marin-moe-535b"):
        load_ladder("no-such-ladder")


def test_unknown_format_names_the_suffix_and_the_supported_ones(tmp_path):
    (tmp_path / "runs.xlsx").write_bytes(b"")
    with pytest.raises(LadderError, match=r"unsupported file format '\.xlsx'.*supported: .*\.csv.*"
                                          r"\.parquet.*\.jsonl"):
        load_ladder(tmp_path / "runs.xlsx")


def test_missing_file_gives_the_path(tmp_path):
    with pytest.raises(LadderError, match=r"file not found: .*nothere\.csv"):
        load_ladder(tmp_path / "nothere.csv")


def test_manifest_pointing_at_a_missing_file(tmp_path):
    path = write(tmp_path / "m.toml", 'name = "t"\ndescription = "t"\n'
                 '[source]\nreader = "wandb"\npath = "gone.csv"\n')
    with pytest.raises(LadderError, match=r"file not found: .*gone\.csv"):
        load_ladder(path)


def test_unknown_manifest_key_names_the_key_and_the_file(tmp_path):
    path = write(tmp_path / "typo.toml", """
        name = "t"
        description = "t"
        [source]
        reader = "csv"
        path = "t.csv"
        colour = "red"
    """)
    with pytest.raises(ManifestError, match=r"typo\.toml: unknown key 'source\.colour'"):
        load_ladder(path)


def test_invalid_toml_is_a_manifest_error(tmp_path):
    path = write(tmp_path / "broken.toml", 'name = "t\n')
    with pytest.raises(ManifestError, match=r"broken\.toml: not valid TOML"):
        load_manifest(path)


def test_missing_data_dir_says_where_it_looked_and_how_to_set_it(tmp_path, monkeypatch):
    missing = tmp_path / "no-such-dir"
    monkeypatch.setenv("DELPHI_DATA_DIR", str(missing))
    with pytest.raises(DataDirError, match=rf"looked in {missing}.*set DELPHI_DATA_DIR="):
        load_ladder("epoch-chinchilla")


def test_load_manifest_refuses_a_data_file(tmp_path):
    TIDY.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(LadderError, match="not a manifest"):
        load_manifest(tmp_path / "t.csv")


def test_list_ladders_names_and_describes_the_bundled_ladders():
    ladders = dict(list_ladders())
    assert {"epoch-chinchilla", "marin-delphi-dense", "marin-moe-535b", "olmo-ladder"} <= set(ladders)
    assert all(desc for desc in ladders.values())


# ---------------------------------------------------------------- bad values in a CSV
GOOD = "run,step,params,tokens,flops,loss\n"


@pytest.mark.parametrize("body, message", [
    ("a,1,1e6,1e8,6e14,nan\n", r"run 'a' \(row 0\): column 'loss' is empty or NaN"),
    ("a,1,1e6,1e8,6e14,3\nb,1,-5,1e8,6e14,3\n", r"run 'b' \(row 1\): column 'params' must be > 0"),
    ("a,1,1e6,0,6e14,3\n", r"run 'a' \(row 0\): column 'tokens' must be > 0"),
    ("a,1,1e6,1e8,inf,3\n", r"run 'a' \(row 0\): column 'flops' is infinite"),
    ("a,1,1e6,1e8,6e14,3\na,1,1e6,2e8,1.2e15,2.9\n", r"run 'a': duplicate rows for step = 1 \(rows 0, 1\)"),
    ("a,1,1e6,1e8,6e14,three\n", r"run 'a' \(row 0\): column 'loss' is not a number: 'three'"),
])
def test_bad_values_name_run_row_and_column(tmp_path, body, message):
    path = tmp_path / "bad.csv"
    path.write_text(GOOD + body)
    with pytest.raises(LadderError, match=message):
        load_ladder(path)


# ------------------------------------------- exact duplicate rows (two logs concatenated)
#: Six runs, one row each, on L = 1.8 + 2 (C/1e18)^-0.3; run r1 also logs a step 2.
LOG = ("run,step,flops,loss\n"
       + "".join(f"r{i},1,{1e18 * 3 ** i:g},{1.8 + 2 * 3 ** (-0.3 * i):.6f}\n" for i in range(6))
       + f"r1,2,3e18,{1.8 + 2 * 3 ** -0.3:.6f}\n")
R1_STEP_2 = LOG.splitlines(True)[-1]


def _twice() -> str:
    # the log, then its first three data rows again (rows 7, 8, 9 repeat rows 0, 1, 2)
    return LOG + "".join(LOG.splitlines(True)[1:4])


@pytest.mark.parametrize("stream", ["text", "bytes"])
def test_exact_duplicate_rows_are_merged_with_a_warning(stream):
    import io
    from delphi.errors import DuplicateRowsWarning
    data = io.StringIO(_twice()) if stream == "text" else io.BytesIO(_twice().encode())
    with pytest.warns(DuplicateRowsWarning) as caught:
        ladder = load_ladder(data)
    [message] = [str(w.message) for w in caught]
    assert message.startswith("ladder 'stdin': 3 rows repeat an earlier row exactly")
    assert ("run 'r0' step 1 (row(s) 7 repeat row(s) 0); run 'r1' step 1 (row(s) 8 repeat "
            "row(s) 1); run 'r2' step 1 (row(s) 9 repeat row(s) 2)") in message
    assert message in ladder.warnings
    # one copy of each: the log as read once
    once = load_ladder(io.StringIO(LOG))
    pd.testing.assert_frame_equal(ladder.table, once.table)
    assert len(ladder.table) == 7
    assert [(e.run, e.reason) for e in ladder.exclusions] == [
        (f"r{i}", f"row {7 + i} repeats row {i} exactly (identical in every column); the copy "
                  f"dropped") for i in range(3)]


def test_rows_of_one_step_with_different_losses_are_still_an_error():
    import io
    from delphi.errors import DuplicateRowsWarning
    text = _twice().replace(R1_STEP_2, R1_STEP_2 + "r1,2,3e18,3.44\n")
    with pytest.warns(DuplicateRowsWarning), pytest.raises(LadderError) as info:
        load_ladder(io.StringIO(text))
    # the exact copies are merged; r1's two rows at step 2 differ: which one is right?
    assert ("run 'r1': duplicate rows for step = 2 (rows 6, 7), differing in loss"
            in str(info.value))
    assert "'r0'" not in str(info.value) and "'r2'" not in str(info.value)


def test_cli_merges_exact_duplicates_and_refuses_differing_ones(monkeypatch, capsys):
    import io
    import sys
    from delphi.cli import main
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(_twice().encode())))
    assert main(["fit", "-", "--law", "power"]) == 0
    out = capsys.readouterr().out
    assert "warning    ladder 'stdin': 3 rows repeat an earlier row exactly" in out
    assert "excluded   r2: row 9 repeats row 2 exactly" in out and "points     6 runs" in out
    clash = _twice().replace(R1_STEP_2, R1_STEP_2 + "r1,2,3e18,3.44\n")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(clash.encode())))
    assert main(["fit", "-", "--law", "power"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("delphi: error: ") and err.count("\n") == 1
    assert "run 'r1': duplicate rows for step = 2 (rows 6, 7), differing in loss" in err


# --------------------------------------------- scale: columns logged in other units
#: Parameters in millions and tokens in billions; the same ladder in counts is COUNTS.
MILLIONS = "run,params,tokens,loss\na,10,0.2,4.1\nb,20,0.4,3.9\nc,40,0.8,3.7\n"
COUNTS = "run,params,tokens,loss\na,1e7,2e8,4.1\nb,2e7,4e8,3.9\nc,4e7,8e8,3.7\n"


def test_scale_multiplies_columns_after_reading_and_says_so():
    import io
    ladder = load_ladder(io.StringIO(MILLIONS), scale={"params": 1e6, "tokens": 1e9})
    counts = load_ladder(io.StringIO(COUNTS))
    pd.testing.assert_frame_equal(ladder.table, counts.table)
    # C = 6 N D from the scaled counts: 6 * 1e7 * 2e8 for run a
    assert ladder.table.set_index("run").at["a", "flops"] == pytest.approx(1.2e16, rel=1e-12)
    assert ladder.scale == {"params": 1e6, "tokens": 1e9} and counts.scale == {}
    assert ladder.warnings == [
        "ladder 'stdin': column params multiplied by 1e+06 after reading, as "
        "scale={'params':1e+06} (CLI --scale params=1e+06) asked; e.g. row 0: 10 -> 1e+07",
        "ladder 'stdin': column tokens multiplied by 1e+09 after reading, as "
        "scale={'tokens':1e+09} (CLI --scale tokens=1e+09) asked; e.g. row 0: 0.2 -> 2e+08"]
    assert counts.warnings == []
    frame = pd.read_csv(io.StringIO(MILLIONS))
    scaled = load_ladder(frame, scale={"params": 1e6, "tokens": 1e9})
    pd.testing.assert_frame_equal(scaled.table, counts.table)
    assert frame["params"].tolist() == [10, 20, 40]         # the caller's frame as it was
    # the selection keeps the record
    assert scaled.select(runs=["a", "b"]).scale == scaled.scale
    # unscaled, tokens below 1 are refused, and the error says how to scale them
    with pytest.raises(LadderError, match=r"run 'a' \(row 0\): column 'tokens' is 0.2, outside "
                                          r"1..1e\+30: not a plausible token count \(in other "
                                          r"units\? multiply the column as it is read: "
                                          r"scale=\{'tokens':FACTOR\} \(CLI --scale "
                                          r"tokens=FACTOR\), or \[scale\] in a manifest\)"):
        load_ladder(io.StringIO(MILLIONS))


@pytest.mark.parametrize("scale, message", [
    ({"param": 1e6}, r"unknown column 'param' \(did you mean 'params'\?\); columns that can "
                     r"be scaled: params, tokens, flops, loss, step"),
    ({"Tokens": 1e9}, r"unknown column 'Tokens' \(did you mean 'tokens'\?\)"),
    ({"run": 2.0}, r"unknown column 'run'; columns that can be scaled"),
    ({"params": 0}, r"the factor for params must be a positive finite number, got 0"),
    ({"params": -1e6}, r"the factor for params must be a positive finite number, got -1000000"),
    ({"tokens": float("inf")}, r"the factor for tokens must be a positive finite number, got inf"),
    ({"tokens": float("nan")}, r"the factor for tokens must be a positive finite number, got nan"),
    ({"params": True}, r"the factor for params must be a positive finite number, got True"),
    ({"params": "1e6"}, r"the factor for params must be a positive finite number, got '1e6'"),
    ({"flops": 1e9}, r"scale \(CLI --scale\) given for column 'flops', which the table does "
                     r"not have; columns found: run, params, tokens, loss"),
    ([("params", 1e6)], r"scale maps canonical columns to factors"),
])
def test_scale_refuses_unknown_columns_and_bad_factors(scale, message):
    import io
    with pytest.raises(LadderError, match=message):
        load_ladder(io.StringIO(MILLIONS), scale=scale)


def test_scale_is_refused_with_a_manifest(data_dir):
    with pytest.raises(LadderError, match=r"is a manifest: it scales its columns in its "
                                          r"\[scale\] table"):
        load_ladder("marin-delphi-dense", scale={"params": 2.0})


def test_cli_scale_is_repeatable_and_its_errors_are_one_line(monkeypatch, capsys):
    import io
    import sys
    from delphi.cli import main

    def run(*argv):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(MILLIONS.encode())))
        code = main(["fit", "-", "--law", "power", *argv])
        return (code, *capsys.readouterr())
    code, out, err = run("--scale", "params=1e6", "--scale", "tokens=1e9")
    assert code == 0, err
    assert ("warning    ladder 'stdin': column params multiplied by 1e+06 after reading, as "
            "--scale params=1e+06 asked; e.g. row 0: 10 -> 1e+07") in out
    assert "as --scale tokens=1e+09 asked" in out
    # bad command-line usage: exit code 2, the flag named
    code, out, err = run("--scale", "params=1e6", "--scale", "params=1e3")
    assert code == 2 and err.count("\n") == 1, err
    assert "--scale params given twice (1e+06 and 1000)" in err
    for argv, says in ((["--scale", "parms=1e6"], "argument --scale: unknown column 'parms' "
                                                  "(did you mean 'params'?)"),
                       (["--scale", "params=0"], "argument --scale: the factor for params must "
                                                 "be a positive")):
        with pytest.raises(SystemExit) as stop:
            run(*argv)
        assert stop.value.code == 2 and says in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run("--scale", "params")
    assert "expected NAME=FACTOR" in capsys.readouterr().err


def test_missing_required_column_lists_the_columns_found(tmp_path):
    path = tmp_path / "noloss.csv"
    path.write_text("run,params,tokens,val\na,1e6,1e8,3\n")
    with pytest.raises(LadderError, match=r"missing required column\(s\) loss; "
                                          r"columns found: run, params, tokens, val"):
        load_ladder(path)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_run_ids_are_text_not_numbers(tmp_path, suffix):
    # Issue 9: "1", "1.0" and "001" are three runs; read as numbers they merged into one run
    # "1.0", silently losing two runs' final points.
    frame = pd.DataFrame({"run": ["1", "1.0", "001", "2"], "flops": [1e18, 3e18, 1e19, 3e19],
                          "loss": [3.5, 3.3, 3.1, 3.0]})
    path = tmp_path / f"ids{suffix}"
    if suffix == ".csv":
        path.write_text("run,flops,loss\n1,1e18,3.5\n1.0,3e18,3.3\n001,1e19,3.1\n2,3e19,3.0\n")
    elif suffix == ".jsonl":  # ids as a JSON number and as strings
        path.write_text('{"run": 1, "flops": 1e18, "loss": 3.5}\n'
                        '{"run": "1.0", "flops": 3e18, "loss": 3.3}\n'
                        '{"run": "001", "flops": 1e19, "loss": 3.1}\n'
                        '{"run": 2, "flops": 3e19, "loss": 3.0}\n')
    else:
        frame.to_parquet(path, index=False)
    ladder = load_ladder(path)
    assert sorted(ladder.runs) == ["001", "1", "1.0", "2"]
    finals, _ = ladder.final_points()
    assert len(finals) == 4
    assert dict(zip(finals["run"], finals["loss"]))["001"] == 3.1


# ------------------------------------------------------------- --metric (review item 14)
BPB_CSV = ("run,flops,loss,eval/paloma/bpb,Val_PPL\n"
           "a,1e18,3.52,1.53,33.8\nb,3e18,3.34,1.45,28.2\nc,1e19,3.15,1.37,23.4\n")


def test_metric_matches_a_header_ignoring_case(tmp_path, capsys):
    from delphi.cli import main
    path = write(tmp_path / "bpb.csv", BPB_CSV)
    ladder = load_ladder(path, metric="EVAL/Paloma/BPB", unit="bits/byte")
    assert ladder.metric == "eval/paloma/bpb"              # as the file spells it
    assert ladder.table.sort_values("run")["loss"].tolist() == [1.53, 1.45, 1.37]
    code = main(["fit", str(path), "--metric", "eval/paloma/BPB", "--law", "power",
                 "--floor", "1.0"])
    out = capsys.readouterr().out
    assert code == 0 and "metric eval/paloma/bpb [bits/byte]" in out


def test_metric_not_found_lists_the_files_columns_and_loss_like_ones(tmp_path):
    path = write(tmp_path / "bpb.csv", BPB_CSV)
    with pytest.raises(LadderError) as info:
        load_ladder(path, metric="nope")
    text = str(info.value)
    # delphi's own `row` column is not in the file, so it is not listed.
    assert text.endswith("column 'nope' (for loss) not found; columns found: run, flops, loss, "
                         "eval/paloma/bpb, Val_PPL; loss-like columns: loss, eval/paloma/bpb, "
                         "Val_PPL")


def test_metric_matching_two_headers_ignoring_case_is_ambiguous(tmp_path):
    path = write(tmp_path / "two.csv", "run,flops,Loss2,LOSS2\na,1e18,3.5,3.6\nb,3e18,3.3,3.4\n")
    with pytest.raises(LadderError, match=r"'loss2' \(for loss\) matches 'Loss2', 'LOSS2' "
                                          r"ignoring case; give the exact name"):
        load_ladder(path, metric="loss2")


# ---------------------------------------------------------------- the one-read CSV path
def _both_csv_reads(path, text_columns=(), compression=None):
    from delphi.inputs.readers import _common

    return (_common._read_csv(path, compression, list(text_columns)),
            _common._read_csv_quickly(path, compression, list(text_columns)))


def test_the_one_read_csv_path_gives_the_reference_frame_on_the_bundled_ladders(data_dir):
    """Issue 27: the quick CSV read (one pandas read, one list of missing-value strings) is
    kept only when its frame is the three-read reference's; on every bundled CSV it is kept,
    and equal to the reference cell for cell, dtype for dtype."""
    import glob

    files = sorted(glob.glob(str(data_dir / "**" / "*.csv*"), recursive=True))
    files += sorted(glob.glob(str(Path(__file__).parents[1] / "ladders" / "*.csv")))
    assert len(files) >= 40
    for name in files:
        for text in ((), ("Name",)):
            ref, quick = _both_csv_reads(Path(name), text,
                                         "gzip" if name.endswith(".gz") else None)
            assert quick is not None, name
            pd.testing.assert_frame_equal(quick, ref, check_exact=True)
            assert list(quick.dtypes) == list(ref.dtypes) and list(quick.columns) == list(ref.columns)


@pytest.mark.parametrize("text,kept", [
    ("run,loss,seed\nr1,3.5,NA\nr2,null,1\n", True),       # missing-value strings in numbers
    ("run,loss\nNA,3.5\nnull,3.4\n", False),               # ... as ids: the reference is read
    ("run,loss\n,3.5\nb,3.4\n", False),                    # an empty id
    ("\ufeffrun,loss\n001,3.5\n1,3.4\n", True),            # byte-order mark; ids as text
    ("run,x,x.1\na,1,2\nb,3,4\n", True),                   # x.1 beside x, written so
    ("\nrun,loss\na,1\n", False),                          # a blank first line: no guess
    ("loss\na,1\nb,2\n", True),                            # a short header: an index
    ('"run, name",loss\na,1\n', True),                     # a quoted header field
])
def test_the_one_read_csv_path_is_the_reference_or_steps_aside(tmp_path, monkeypatch, text,
                                                                kept):
    """Where the one read cannot be sure of the reference's frame (a missing-value string or
    an empty cell as a run id) it reads the reference; either way the frame is the
    reference's."""
    from delphi.inputs.readers import _common

    path = tmp_path / "t.csv"
    path.write_text(text, encoding="utf-8")
    reference = _common._read_csv(path, None, [])
    calls = []
    read = _common._read_csv
    monkeypatch.setattr(_common, "_read_csv", lambda *a: calls.append(a) or read(*a))
    quick = _common._read_csv_quickly(path, None, [])
    assert (not calls) == kept
    pd.testing.assert_frame_equal(quick, reference, check_exact=True)
    frame = _common.read_file(path, "csv")
    pd.testing.assert_frame_equal(frame.drop(columns="row"), reference, check_exact=True)


def test_the_one_read_csv_path_still_refuses_a_repeated_header_name(tmp_path):
    from delphi.inputs.readers._common import read_file

    path = tmp_path / "dup.csv"
    path.write_text("run,loss,loss\na,1,2\n")
    with pytest.raises(LadderError, match="columns 2 and 3 of the header are both named 'loss'"):
        read_file(path, "csv")
    gz = tmp_path / "dup.csv.gz"
    import gzip
    gz.write_bytes(gzip.compress(b"run,run\na,b\n"))
    with pytest.raises(LadderError, match="both named 'run'"):
        read_file(gz, "csv")


def test_a_header_row_repeated_inside_a_csv_is_named_by_its_line(tmp_path):
    # Before: two exports joined with `cat` gave "run 'run' (row 6): column 'flops' is not a
    # number: 'flops'" and the same for every other column.
    path = tmp_path / "joined.csv"
    path.write_text("run,flops,loss\nr0,1e18,3.9\nr1,1e19,3.4\n Run , flops,loss\nr2,1e20,3.0\n")
    with pytest.raises(LadderError, match=r"joined.csv, line 4: a repeat of the header row "
                                          r"\(two CSV files joined\?\)"):
        load_ladder(str(path))
    # a run whose name is only the first column's name is not a header
    path.write_text("run,flops,loss\nr0,1e18,3.9\nrun,1e19,3.4\nr2,1e20,3.0\n")
    assert load_ladder(str(path)).table["run"].nunique() == 3


def test_a_csv_ladder_is_consolidated_without_changing_its_table(data_dir):
    """pandas 3 reads a CSV as one block per column; the readers consolidate a table of at
    most CONSOLIDATE_CELLS cells before it becomes a Ladder (every later selection then takes
    a few blocks, not one per column: issue 27). The table is the one read without it."""
    import delphi.inputs.readers._common as common

    fast = load_ladder("gadre2024")
    assert fast.table._mgr.nblocks <= 8 < fast.table.shape[1]
    saved = common.CONSOLIDATE_CELLS
    common.CONSOLIDATE_CELLS = -1          # never consolidate: the table as read
    try:
        slow = load_ladder("gadre2024")
    finally:
        common.CONSOLIDATE_CELLS = saved
    assert slow.table._mgr.nblocks > 50
    pd.testing.assert_frame_equal(fast.table, slow.table, check_exact=True)
    assert list(fast.table.dtypes) == list(slow.table.dtypes)
