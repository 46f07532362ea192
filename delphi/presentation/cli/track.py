"""``delphi track``: follow a registered prediction's run checkpoint by checkpoint.

:func:`add_commands` registers the subcommand and returns ``{command: handler}``. The handler
only parses and prints: the work is in :mod:`delphi.registry.tracking`. Standard library only
at import.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable

from .output import json_text, print_json
from .options import count, examples, positive_float

__all__ = ["add_commands"]

Handler = Callable[[argparse.Namespace], int]


def add_commands(sub) -> dict[str, Handler]:
    """Add ``track`` to ``sub``; return ``{"track": handler}``."""
    p = sub.add_parser(
        "track", help="score a running run's checkpoints against its registered curve band, "
                      "revise the final forecast, alarm (exit 3) when it leaves the band",
        epilog=examples(
            "delphi track --registry preds.jsonl --id hero run/metrics.csv",
            "delphi track --registry preds.jsonl --id hero history.csv --loss-column "
            "eval/c4_en-validation/CrossEntropyLoss --json",
            "delphi track --registry preds.jsonl --id hero tb_logs/ --follow --interval 600"))
    p.add_argument("run_log", metavar="RUN_LOG",
                   help="the run's log: a CSV/JSONL/Parquet file (a W&B history export "
                        "included) or a TensorBoard directory, with step (or tokens) and loss; "
                        "'-' reads it from standard input (--format csv|jsonl|parquet)")
    p.add_argument("--registry", required=True, metavar="PATH", help="registry file (JSON Lines)")
    p.add_argument("--id", required=True, metavar="ID",
                   help="the prediction, registered with its curve (register LADDER --curve)")
    p.add_argument("--loss-column", metavar="COLUMN",
                   help="log column (or TensorBoard tag) holding the loss (default: loss, "
                        "else the first of eval/loss, val_loss, eval_loss, named in a note)")
    p.add_argument("--step-column", metavar="COLUMN",
                   help="log column holding the step (default: step, or W&B's _step)")
    p.add_argument("--run", metavar="RUN", help="the run, when the log holds several")
    p.add_argument("--format", choices=("csv", "jsonl", "parquet", "tensorboard"),
                   help="the log's format (default: from its suffix; a folder is TensorBoard)")
    p.add_argument("--patience", type=count(1), default=3, metavar="K",
                   help="consecutive checkpoints outside the band that raise the alarm "
                        "(default 3); the alarm exits with code 3")
    p.add_argument("--follow", action="store_true",
                   help="keep re-reading the log every --interval seconds until the run "
                        "reaches its planned last step (or the alarm); one JSON Lines record "
                        "per checkpoint with --json")
    p.add_argument("--interval", type=positive_float, default=60.0, metavar="SECONDS",
                   help="seconds between reads with --follow (default 60)")
    p.add_argument("--timeout", type=positive_float, metavar="SECONDS",
                   help="with --follow: stop after this long even if the run has not ended")
    p.add_argument("--force", action="store_true",
                   help="record the log even when its first checkpoints are more than 1.3x "
                        "above or below the registered curve (or its final loss 1.3x off the "
                        "prediction): refused otherwise, before anything is recorded, as a log "
                        "in another unit or metric (bits vs nats: 1.44x) would fill the "
                        "registry with outcomes that cannot be corrected")
    p.add_argument("--sign-key", metavar="FILE",
                   help="sign each appended outcome with this Ed25519 private key")
    p.add_argument("--json", action="store_true",
                   help="one JSON document {id, checkpoints, alarm} (with --follow JSON Lines: "
                        "one record per checkpoint, then {\"summary\": {id, alarm, notes, "
                        "...}}; stopped by Ctrl-C or SIGTERM, the stream ends with an "
                        "{\"error\": {\"type\": \"Interrupted\", ...}} line instead, every "
                        "checkpoint written before it being in the registry)")
    return {"track": _cmd_track}


def _cmd_track(args) -> int:
    from ...registry.tracking import ALARM_EXIT, track
    from . import output
    from .output import command_stdout

    out = command_stdout()
    output.JSON_LINES = bool(args.follow and args.json)

    def emit(cp) -> None:
        # --follow: each checkpoint as soon as it is recorded, straight to the real stdout
        out.write((json_text(cp.to_dict(), one_line=True) if args.json else cp.line())
                  + "\n")
        out.flush()

    run_log = args.run_log
    if run_log == "-":
        # standard input, as `delphi predict -` reads a ladder: read once, in memory
        if args.follow:
            from .output import UsageError
            raise UsageError("--follow re-reads a growing file; standard input ('-') is read "
                             "once: give the log's path")
        if args.format == "tensorboard":
            from .output import UsageError
            raise UsageError("a TensorBoard log is a folder, not standard input")
        from ...inputs.readers.tabular import read_stream
        run_log = read_stream(
            sys.stdin, args.format or "csv", what="run log",
            example="pipe the run's log, e.g. `cat run.csv | delphi track --registry "
                    "preds.jsonl --id ID -`").frame
    result = track(args.registry, args.id, run_log, patience=args.patience,
                   follow=args.follow, interval=args.interval, timeout=args.timeout,
                   sign_key=args.sign_key, format=args.format, loss_column=args.loss_column,
                   step_column=args.step_column, run=args.run,
                   on_checkpoint=emit if args.follow else None, force=args.force)
    if args.follow:
        if not args.json:     # the summary after the lines already written
            print("\n".join(result.report().splitlines()[len(result.checkpoints):]))
        else:                 # JSON Lines: a last record that closes the stream
            doc = result.to_dict()
            doc.pop("checkpoints")
            print(json_text({"summary": doc}, one_line=True))
    elif args.json:
        print_json(result.to_dict())
    else:
        print(result.report())
    return ALARM_EXIT if result.alarm else 0
