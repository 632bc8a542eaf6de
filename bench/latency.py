"""The sink's latency in a bench's table.

The sink reports `latency` as null when it has no figure to give: its samples were stamped by
another host's clock (README, the sink's JSON fields). A table then shows "-" there, rather
than the bench stopping with a TypeError after its runs, their other figures lost.
Imported by the benches' inline Python, which runs from the repository's top directory.
"""


def latency_us(sink, key):
    """The sink's latency figure `key` (`p50_us`, `p99_us`, ...), or None when it has none."""
    lat = sink.get("latency")
    return None if lat is None else lat[key]


def shown(x, spec=".0f", unit=""):
    """`x` as `spec` formats it, then `unit`; "-" for a figure that is not there (None)."""
    return "-" if x is None else format(x, spec) + unit
