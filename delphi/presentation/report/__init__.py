"""HTML reports: one self-contained static page for a ladder or a registry.

``delphi report LADDER --html OUT/``, ``delphi report --registry PATH --html OUT/`` and
``delphi report --recipes A B [C ...] --target-flops C --html OUT/`` (a comparison of recipes,
:func:`recipes_page`) write ``OUT/index.html``; in Python::

    import delphi
    from delphi.report import ladder_report, registry_report, write_html

    ladder = delphi.load_ladder("marin-moe-535b")
    page = ladder_report(ladder, {"flops": 2.61e24}, "power", fixed={"E": 1.5})
    write_html(page, "report/")                      # -> report/index.html

The ladder page holds the forecast (value, interval, method) and its figure, the fit (its
parameters, warnings and exclusions with their reasons), the residuals, a backtest (which
design, and its figure) and the table of runs ordered by compute; the registry page holds
the scorecard (each prediction, its interval, outcomes, relative error, inside or not, z and
PIT), the forecast curves against their partial outcomes, and the chain's verification and
head hash. Figures are inline SVG, CSS is inline, there is no script and no external file.
See :mod:`delphi.report.html`.
"""

from .html import (Report, generated_time, ladder_page, ladder_report, recipes_page,
                   registry_page, registry_report, write_html)

__all__ = ["Report", "ladder_page", "ladder_report", "registry_page", "registry_report",
           "recipes_page",
           "write_html", "generated_time"]
