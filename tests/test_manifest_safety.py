"""Manifests are untrusted input (issue 10): paths stay in the manifest's folder or the data
directory, globs are bounded, run-id templates are checked before use, and a file that is not a
ladder table is refused without quoting any of its content."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from delphi.cli import main
from delphi.errors import LadderError, ManifestError
from delphi.readers import load_ladder, load_manifest
from delphi.readers import manifest as manifest_module
from delphi.readers._common import SourceTable
from delphi.readers._pipeline import check_tables, format_run_ids
from delphi.readers.manifest import read_manifest
from delphi.readers.paths import BUNDLED_DIR

# Two runs of two checkpoints; a valid ladder table.
TABLE = "run,step,params,tokens,loss\na,100,1e6,1e8,4.0\na,200,1e6,2e8,3.5\n" \
        "b,100,4e6,1e8,3.6\nb,200,4e6,2e8,3.2\n"
# What /etc/shadow looks like: the first line must never appear in a message.
SHADOW = "root:$6$saltsalt$c2VjcmV0aGFzaA:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n"
SECRET = "c2VjcmV0aGFzaA"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def manifest(folder: Path, path: str, *, reader: str = "csv", extra: str = "",
             name: str = "m.toml") -> Path:
    """A manifest in ``folder`` reading ``path``."""
    return write(folder / name, f'name = "t"\ndescription = "t"\n[source]\nreader = "{reader}"\n'
                                f'path = {json.dumps(path)}\n{extra}')


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    """``(manifest folder, data dir, outside folder)``, the data dir set as $DELPHI_DATA_DIR."""
    home, data, outside = tmp_path / "home", tmp_path / "data", tmp_path / "outside"
    for d in (home, data, outside):
        d.mkdir()
    monkeypatch.setenv("DELPHI_DATA_DIR", str(data))
    return home, data, outside


# ------------------------------------------------------------------ paths stay inside
def test_absolute_path_outside_is_refused_naming_manifest_key_and_resolved_path(dirs):
    home, _, outside = dirs
    (outside / "runs.csv").write_text(TABLE)
    m = manifest(home, str(outside / "runs.csv"))
    with pytest.raises(ManifestError) as info:
        load_ladder(m)
    msg = str(info.value)
    assert msg.startswith(f"{m}: [source] path '{outside / 'runs.csv'}' resolves to "
                          f"{os.path.realpath(outside / 'runs.csv')}, outside")
    assert msg.endswith("pass allow_outside_paths=True (CLI --allow-outside-paths)")
    # Trusted explicitly: the same manifest loads (runs a and b as in TABLE).
    assert load_ladder(m, allow_outside_paths=True).runs == ["a", "b"]


def test_etc_shadow_is_refused_before_anything_is_read(dirs):
    home, _, _ = dirs
    m = manifest(home, "/etc/shadow", extra='[columns]\nparams = "N"\n')
    with pytest.raises(ManifestError, match="resolves to " + os.path.realpath("/etc/shadow")):
        load_ladder(m)


def test_dotdot_escaping_the_folder_is_refused(dirs):
    home, _, outside = dirs
    (outside / "runs.csv").write_text(TABLE)
    m = manifest(home, "../outside/runs.csv")
    with pytest.raises(ManifestError,
                       match=f"resolves to {os.path.realpath(outside / 'runs.csv')}, outside"):
        load_ladder(m)


def test_dotdot_that_stays_inside_is_fine(dirs):
    home, _, _ = dirs
    (home / "sub").mkdir()
    (home / "runs.csv").write_text(TABLE)
    assert load_ladder(manifest(home, "sub/../runs.csv")).runs == ["a", "b"]


def test_a_missing_file_outside_is_refused_as_outside_not_as_missing(dirs):
    # No oracle for which files exist elsewhere on the machine.
    home, _, outside = dirs
    m = manifest(home, str(outside / "nothing-here.csv"))
    with pytest.raises(ManifestError, match="outside the folders a manifest may read"):
        load_ladder(m)


def test_symlinked_file_leading_outside_is_refused(dirs):
    home, _, outside = dirs
    (outside / "secret.csv").write_text(TABLE)
    (home / "runs.csv").symlink_to(outside / "secret.csv")
    with pytest.raises(ManifestError,
                       match=f"resolves to {os.path.realpath(outside / 'secret.csv')}"):
        load_ladder(manifest(home, "runs.csv"))


def test_symlinked_folder_leading_outside_is_refused(dirs):
    home, _, outside = dirs
    (outside / "runs.csv").write_text(TABLE)
    (home / "data").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ManifestError, match=f"resolves to {os.path.realpath(outside)}"):
        load_ladder(manifest(home, "data/runs.csv"))


def test_folder_source_with_a_file_symlink_leading_outside_is_refused(dirs):
    home, _, outside = dirs
    (home / "runs").mkdir()
    (home / "runs" / "a.csv").write_text(TABLE)
    (outside / "b.csv").write_text(TABLE.replace("a,", "c,").replace("b,", "d,"))
    (home / "runs" / "b.csv").symlink_to(outside / "b.csv")
    with pytest.raises(ManifestError, match=r"names a file that resolves to .*outside.*b\.csv"):
        load_ladder(manifest(home, "runs"))


def test_symlink_inside_the_folder_is_fine(dirs):
    home, _, _ = dirs
    (home / "real.csv").write_text(TABLE)
    (home / "alias.csv").symlink_to(home / "real.csv")
    assert load_ladder(manifest(home, "alias.csv")).runs == ["a", "b"]


def test_data_dir_is_allowed_from_anywhere_and_escaping_it_is_not(dirs):
    home, data, outside = dirs
    (data / "pub.csv").write_text(TABLE)
    (outside / "x.csv").write_text(TABLE)
    assert load_ladder(manifest(home, "pub.csv", extra='root = "data"\n')).runs == ["a", "b"]
    # An absolute path into the data directory is inside too.
    assert load_ladder(manifest(home, str(data / "pub.csv"), name="abs.toml")).runs == ["a", "b"]
    with pytest.raises(ManifestError, match="outside"):
        load_ladder(manifest(home, "../outside/x.csv", extra='root = "data"\n', name="e.toml"))


def test_every_bundled_manifest_stays_inside(data_dir):
    # The check alone (no data read): every bundled manifest names files, all inside.
    for path in sorted(BUNDLED_DIR.glob("*.toml")):
        found = read_manifest(path).source_files()
        assert found.files, path.name
        allowed = [os.path.realpath(BUNDLED_DIR), os.path.realpath(data_dir)]
        for f in found.files:
            real = os.path.realpath(f)
            assert any(real.startswith(a + os.sep) for a in allowed), (path.name, real)


# ------------------------------------------------------------------ bounded globs
@pytest.mark.parametrize("pattern", ["/**/*.csv", "/*.csv", "/*/shadow"])
def test_root_anchored_glob_is_refused_even_when_outside_paths_are_allowed(dirs, pattern,
                                                                           monkeypatch):
    home, _, _ = dirs
    m = manifest(home, pattern)

    def no_listing(*args, **kwargs):
        raise AssertionError("a folder was listed")

    # Refused before any folder is listed (glob.glob and the check both list with scandir).
    monkeypatch.setattr(os, "scandir", no_listing)
    with pytest.raises(ManifestError, match="a glob anchored at the filesystem root"):
        load_ladder(m, allow_outside_paths=True)


def test_dotdot_after_a_wildcard_is_refused(dirs):
    home, _, outside = dirs
    (home / "sub").mkdir()
    (outside / "x.csv").write_text(TABLE)
    with pytest.raises(ManifestError, match=r"'\.\.' after a wildcard"):
        load_ladder(manifest(home, "*/../../outside/*.csv"))


def test_glob_inside_the_folder_reads_every_match(dirs):
    home, _, _ = dirs
    (home / "runs" / "deep").mkdir(parents=True)
    (home / "runs" / "one.csv").write_text(TABLE)
    (home / "runs" / "deep" / "two.csv").write_text(
        TABLE.replace("a,", "c,").replace("b,", "d,"))
    assert load_ladder(manifest(home, "runs/**/*.csv")).runs == ["a", "b", "c", "d"]


def test_glob_through_a_symlinked_folder_leading_outside_is_refused(dirs):
    home, _, outside = dirs
    (home / "runs").mkdir()
    (home / "runs" / "one.csv").write_text(TABLE)
    (outside / "x.csv").write_text(TABLE)
    (home / "runs" / "elsewhere").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ManifestError, match="reaches a folder that resolves to .*outside"):
        load_ladder(manifest(home, "runs/**/*.csv"))


def test_glob_over_symlink_loops_is_refused_not_walked(dirs):
    # Two loops make glob.glob's '**' walk 2**40 paths; the check stops at the first loop.
    home, _, _ = dirs
    (home / "runs").mkdir()
    (home / "runs" / "one.csv").write_text(TABLE)
    (home / "runs" / "a").symlink_to(home / "runs", target_is_directory=True)
    (home / "runs" / "b").symlink_to(home / "runs", target_is_directory=True)
    with pytest.raises(ManifestError, match="symlink loop"):
        load_ladder(manifest(home, "runs/**/*.csv"))


@pytest.mark.parametrize("source", ["runs", "runs/*.csv"])
def test_file_count_limit(dirs, monkeypatch, source):
    home, _, _ = dirs
    (home / "runs").mkdir()
    for i in range(4):
        runs = TABLE.replace("a,", f"a{i},").replace("b,", f"b{i},")
        (home / "runs" / f"r{i}.csv").write_text(runs)
    monkeypatch.setattr(manifest_module, "MAX_SOURCE_FILES", 4)
    assert len(load_ladder(manifest(home, source)).runs) == 8       # 4 files x 2 runs
    monkeypatch.setattr(manifest_module, "MAX_SOURCE_FILES", 3)
    with pytest.raises(ManifestError, match="names more than 3 files"):
        load_ladder(manifest(home, source))


def test_walk_limit_stops_a_glob_over_a_big_tree(dirs, monkeypatch):
    home, _, _ = dirs
    (home / "tree").mkdir()
    for i in range(60):
        (home / "tree" / f"f{i}.txt").write_text("")
    monkeypatch.setattr(manifest_module, "MAX_WALK_ENTRIES", 50)
    with pytest.raises(ManifestError, match="more than 50 directory entries examined"):
        load_ladder(manifest(home, "tree/**/*.csv"))


def test_default_limits_are_documented():
    doc = manifest_module.__doc__
    assert "MAX_SOURCE_FILES" in doc and "MAX_WALK_ENTRIES" in doc
    assert manifest_module.MAX_SOURCE_FILES >= 1_000      # room for the published ladders


# ------------------------------------------------------------------ run-id templates
@pytest.mark.parametrize("template, message", [
    ("{row:99999999}", "width 99999999 is over the limit of 64"),
    ("{row:099999999}", "width 99999999 is over the limit of 64"),
    ("{loss:.99999f}", "precision 99999 is over the limit of 32"),
    ("{model:xyz}", "'xyz' is not a format spec"),
    ("{}-x", "names no column"),
    ("plain", "names no column"),
    ("{model}}", "stray brace"),
    ("{model:{width}}", "stray brace"),
])
def test_bad_run_id_template_is_refused_when_the_manifest_is_read(dirs, template, message):
    home, _, _ = dirs
    # The data file does not exist: the template is refused before any data is used.
    m = manifest(home, "missing.csv", extra=f"run_id = {json.dumps(template)}\n")
    with pytest.raises(ManifestError, match=f"source.run_id: run_id template .*{message}"):
        load_manifest(m)
    with pytest.raises(ManifestError, match=message):
        load_ladder(m)


def test_run_id_template_at_the_limits_builds_ids(dirs):
    home, _, _ = dirs
    write(home / "p.csv", "model,params,tokens,loss\ns,1e6,1e8,4.0\nm,4e6,1e8,3.5\n")
    m = manifest(home, "p.csv", extra='run_id = "{model:>64}|{loss:.32f}"\n')
    ladder = load_ladder(m)
    # Right-aligned in 64 characters, then the loss with 32 decimals (4.0 and 3.5 are exact
    # in binary, so every further digit is 0).
    assert ladder.runs == sorted([" " * 63 + "s|4." + "0" * 32, " " * 63 + "m|3.5" + "0" * 31])


def test_format_run_ids_checks_the_template_and_columns_before_formatting():
    table = SourceTable(pd.DataFrame({"model": ["s"], "row": [0]}), "t")
    with pytest.raises(ManifestError, match="width 1000 is over the limit"):
        format_run_ids(table, "{model:1000}")
    with pytest.raises(ManifestError, match="run_id names column 'nope'"):
        format_run_ids(table, "{model:>64}-{nope}")


# ------------------------------------------------------------------ no content echoed
def _refused_without_content(m: Path, **kwargs) -> str:
    with pytest.raises(LadderError) as info:
        load_ladder(m, **kwargs)
    msg = str(info.value)
    assert "its content is not shown" in msg
    for fragment in (SECRET, "root:", "19000", "daemon"):
        assert fragment not in msg
    return msg


def test_shadow_like_file_is_not_a_table_and_is_not_quoted(dirs):
    home, _, outside = dirs
    write(home / "shadow.csv", SHADOW)
    m = manifest(home, "shadow.csv", extra='[columns]\nparams = "N"\n')
    msg = _refused_without_content(m)
    assert f"{home / 'shadow.csv'} is not a CSV table of the expected format" in msg
    # Outside the folder and explicitly allowed: still not quoted.
    write(outside / "shadow", SHADOW)
    _refused_without_content(manifest(home, str(outside / "shadow"), name="o.toml"),
                             allow_outside_paths=True)


@pytest.mark.parametrize("reader, content", [
    ("csv", "Hello, world\nthis is a letter root:" + SECRET + "\n"),   # prose with a comma
    ("wandb", "key=" + SECRET + "\nroot: 19000\n"),
    ("olmo", "a,b\n" + SECRET + "\n"),                                  # ragged rows
    ("csv", "root\x00" + SECRET + ",x\n1,2\n"),                          # binary
    ("csv", "x," + "r" * 300 + "\n1,2\n"),                               # a 300-character "name"
    ("jsonl", "root:" + SECRET + "\n"),
    ("jsonl", "\n\n{root:" + SECRET + "}\n"),
    ("marin", "root:" + SECRET + "\n"),
    ("parquet", SHADOW),
])
def test_non_tables_are_refused_for_every_reader(dirs, reader, content):
    home, _, _ = dirs
    suffix = {"jsonl": ".jsonl", "marin": ".jsonl", "parquet": ".parquet"}.get(reader, ".csv")
    data = home / f"data{suffix}"
    data.write_text(content)
    msg = _refused_without_content(manifest(home, data.name, reader=reader))
    assert str(data) in msg


def test_real_tables_pass_the_check(dirs):
    home, _, _ = dirs
    # Windows line endings and a UTF-8 byte-order mark: a table.
    (home / "crlf.csv").write_bytes(b"\xef\xbb\xbf" + TABLE.replace("\n", "\r\n").encode())
    assert load_ladder(manifest(home, "crlf.csv")).runs == ["a", "b"]
    # One short row among full ones is a table with a missing value: the ladder names the
    # row, the check does not call it "not a table".
    (home / "short.csv").write_text(TABLE + "c,100,1e7\n")
    with pytest.raises(LadderError) as info:
        load_ladder(manifest(home, "short.csv", name="s.toml"))
    assert "not a CSV table" not in str(info.value) and "row 4" in str(info.value)


@pytest.mark.parametrize("line", ['["root:' + SECRET + '"]', "null", '"root:' + SECRET + '"'])
def test_json_that_is_not_an_object_is_left_to_the_reader_and_not_quoted(dirs, line):
    home, _, _ = dirs
    (home / "d.jsonl").write_text(line + "\n")
    with pytest.raises(LadderError) as info:
        load_ladder(manifest(home, "d.jsonl", reader="jsonl"))
    assert SECRET not in str(info.value)


def test_a_data_file_given_directly_is_checked_too(dirs):
    # No manifest: a symlink named .csv to a secret is still not quoted.
    home, _, outside = dirs
    write(outside / "shadow", SHADOW)
    (home / "runs.csv").symlink_to(outside / "shadow")
    with pytest.raises(LadderError) as info:
        load_ladder(home / "runs.csv")
    msg = str(info.value)
    assert msg.startswith(f"{home / 'runs.csv'} is not a CSV table of the expected format")
    assert SECRET not in msg and "root:" not in msg


def test_gzip_content_is_checked_decompressed(dirs):
    home, _, _ = dirs
    (home / "shadow.csv.gz").write_bytes(gzip.compress(SHADOW.encode()))
    (home / "runs.csv.gz").write_bytes(gzip.compress(TABLE.encode()))
    key = "m.toml: [source] path"
    with pytest.raises(LadderError, match="is not a CSV table"):
        check_tables([home / "shadow.csv.gz"], "csv", key)
    check_tables([home / "runs.csv.gz"], "csv", key)          # a table: passes the check


def test_a_real_table_still_lists_its_columns_capped(dirs):
    home, _, _ = dirs
    long = "x" * 200
    names = [f"c{i}" for i in range(34)] + [long]
    write(home / "wide.csv", ",".join(["run", "params", "tokens", "loss"] + names) + "\n"
          + ",".join(["a", "1e6", "1e8", "4.0"] + ["1"] * len(names)) + "\n")
    m = manifest(home, "wide.csv", extra='[[filters]]\ncolumn = "colour"\nequals = "red"\n')
    with pytest.raises(ManifestError) as info:
        load_ladder(m)
    msg = str(info.value)
    # 30 names shown (run, params, tokens, loss, c0..c25), then the count of the rest: 34 + 1
    # more source columns make 39 in all (the reader's own `row` column is not listed).
    shown = ", ".join(["run", "params", "tokens", "loss"] + [f"c{i}" for i in range(26)])
    assert f"columns found: {shown} ... (9 more)" in msg
    assert long[:61] not in msg


def test_long_names_are_cut(dirs):
    home, _, _ = dirs
    long = "y" * 200
    write(home / "t.csv", f"run,params,tokens,loss,{long}\na,1e6,1e8,4.0,1\n")
    m = manifest(home, "t.csv", extra='[[filters]]\ncolumn = "colour"\nequals = "red"\n')
    with pytest.raises(ManifestError) as info:
        load_ladder(m)
    assert f"{'y' * 61}..." in str(info.value) and "y" * 62 not in str(info.value)


# ------------------------------------------------------------------ the command line
def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_refuses_outside_paths_and_takes_the_flag(dirs, capsys):
    home, _, outside = dirs
    (outside / "runs.csv").write_text(TABLE)
    m = manifest(home, str(outside / "runs.csv"))
    code, out, err = run_cli(capsys, "fit", str(m))
    assert code == 1 and out == ""
    line, = err.strip().splitlines()
    assert "[source] path" in line and str(m) in line
    assert line.endswith("pass --allow-outside-paths")      # the flag, not the Python keyword
    assert os.path.realpath(outside / "runs.csv") in line
    # With the flag the manifest is read: two runs of one size each cannot fit a law, so
    # the error is now about the fit, not the path.
    code, out, err = run_cli(capsys, "fit", str(m), "--allow-outside-paths")
    assert "[source] path" not in err and "outside" not in err


def test_cli_shadow_is_refused_without_its_content(dirs, capsys):
    home, _, outside = dirs
    write(outside / "shadow", SHADOW)
    m = manifest(home, str(outside / "shadow"), extra='[columns]\nparams = "N"\n')
    code, out, err = run_cli(capsys, "predict", str(m), "--target-flops", "1e22",
                             "--allow-outside-paths")
    assert code == 1
    assert "is not a CSV table of the expected format" in err + out
    assert SECRET not in err + out and "root:" not in err + out


def test_cli_subprocess_on_the_issue_inputs(dirs, capsys):
    # The issue's examples, as a user runs them: each a one-line error, no traceback. The
    # first as a real process (the exit status and stderr the shell sees); the others through
    # the console script's function in this process, where an exception that would be a
    # traceback propagates and fails the test (a process each cost a second; issue 20).
    home, _, _ = dirs
    cases = {
        manifest(home, "/etc/shadow", name="shadow.toml"): "resolves to",
        manifest(home, "/**/*.csv", name="glob.toml"): "anchored at the filesystem root",
        manifest(home, "t.csv", name="id.toml", extra='run_id = "{row:99999999}"\n'):
            "width 99999999 is over the limit of 64",
    }
    for i, (path, fragment) in enumerate(cases.items()):
        if i == 0:
            proc = subprocess.run([sys.executable, "-m", "delphi.cli", "fit", str(path)],
                                  capture_output=True, text=True, timeout=120)
            code, err = proc.returncode, proc.stderr
        else:
            code, _, err = run_cli(capsys, "fit", str(path))
        assert code == 1, err
        assert "Traceback" not in err
        assert len(err.strip().splitlines()) == 1 and err.startswith("delphi: error: "), err
        assert fragment in err, err
