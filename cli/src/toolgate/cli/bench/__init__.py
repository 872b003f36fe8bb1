"""``toolgate bench``: the governed call against a bare request/reply and the transport floor, in one run.

Modules by role: :mod:`~toolgate.cli.bench.run` (the run), :mod:`~toolgate.cli.bench.floors`
and :mod:`~toolgate.cli.bench.floor_stage` (the two cheaper calls), :mod:`~toolgate.cli.bench.governed`,
:mod:`~toolgate.cli.bench.figures` (percentiles, ratios), :mod:`~toolgate.cli.bench.processes`
(CPU and memory from ``/proc``), :mod:`~toolgate.cli.bench.stages` (where the time goes) and
:mod:`~toolgate.cli.bench.report` (tables, JSON). Absolute times on a shared machine are noise;
the ratios in one run are the figure.
"""
