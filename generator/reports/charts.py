"""The report's charts as inline SVG (matplotlib): shape ranges per axis, perf by concurrency, a tune's candidates.

Labels are ``<text>`` (no mathtext, escaped as XML), ids are salted per chart so they never collide in one page,
and the output is byte-identical for identical input. No pyplot: nothing global is touched.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

__all__ = ["PerfPoint", "ShapeRange", "TunePoint", "perf_chart", "shape_range_chart", "tune_chart"]

#: Every chart's rcParams: text stays text, ids and output deterministic, a plain font that every browser has.
_RC: dict[str, Any] = {
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.size": 9.0,
    "axes.titlesize": 10.0,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
#: No date, no tool version: the same chart gives the same bytes on every run and every matplotlib release's metadata.
_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}
#: What a standalone SVG file carries that an SVG inside HTML must not (the XML declaration, the DTD, metadata).
_PROLOGUE = re.compile(r"\A.*?(?=<svg\b)", re.DOTALL)
_METADATA_ELEMENT = re.compile(r"\s*<metadata>.*?</metadata>", re.DOTALL)
#: Markup (text content is escaped, so it holds no "<"), ids in it, and references to them.
_TAG = re.compile(r"<[^>]*>")
_ID = re.compile(r'<[^>]*?\sid="([^"]+)"')
_ID_ATTRIBUTE = re.compile(r'(\sid=")([^"]+)"')
_REFERENCE = re.compile(r'(url\(#|href="#)([^")]+)')


@dataclass(frozen=True, slots=True)
class ShapeRange:
    """One input's profile: per axis the min, opt and max size (opt None where the contract has none)."""

    name: str
    min_shape: tuple[int, ...]
    opt_shape: tuple[int, ...] | None
    max_shape: tuple[int | None, ...]
    batch_axis: bool  # axis 0 is the batch axis


@dataclass(frozen=True, slots=True)
class PerfPoint:
    """One perf measurement: a concurrency level with its throughput and latency percentiles (ms, None if none)."""

    concurrency: int
    throughput: float
    p50_ms: float | None
    p99_ms: float | None


@dataclass(frozen=True, slots=True)
class TunePoint:
    """One tune candidate at one concurrency: its throughput and p99 latency, and whether it is the baseline or best."""

    concurrency: int
    throughput: float
    p99_ms: float
    baseline: bool = False
    best: bool = False


def _rc(salt: str) -> Any:
    """The rcParams of one chart (typed Any: matplotlib types rc_context's keys as a closed set of literals)."""
    return {**_RC, "svg.hashsalt": salt}


def _svg(figure: Figure, salt: str) -> str:
    """``figure`` as SVG markup for inlining in HTML (no XML prologue, no metadata)."""
    buffer = io.StringIO()
    with matplotlib.rc_context(_rc(salt)):
        figure.savefig(buffer, format="svg", metadata=_METADATA, bbox_inches="tight")
    text = _METADATA_ELEMENT.sub("", _PROLOGUE.sub("", buffer.getvalue(), count=1), count=1)
    return _own_ids(text, f"{salt}-").strip() + "\n"


def _own_ids(text: str, prefix: str) -> str:
    """``text`` with every id (and every reference to one) prefixed; only markup is touched, never text content.

    matplotlib numbers its groups from 1 in each figure (``axes_1``): two charts in one page would repeat ids.
    """
    ids = set(_ID.findall(text))

    def tag(match: re.Match[str]) -> str:
        markup = _ID_ATTRIBUTE.sub(lambda m: f'{m[1]}{prefix}{m[2]}"', match[0])
        return _REFERENCE.sub(lambda m: m[1] + prefix + m[2] if m[2] in ids else m[0], markup)

    return _TAG.sub(tag, text)


def _axis_label(index: int, batch_axis: bool) -> str:
    return f"axis {index} (batch)" if batch_axis and index == 0 else f"axis {index}"


def shape_range_chart(ranges: Sequence[ShapeRange], salt: str) -> str:
    """One panel per input: a bar from min to max for each axis, the opt size marked; SVG text.

    An axis without an upper bound (a ``-1`` dim known only from a config) is drawn to the largest size shown, hatched,
    and labelled ``unbounded``. ``salt`` makes the chart's ids unique in the page (its model and place).
    """
    with matplotlib.rc_context(_rc(salt)):
        heights = [max(1, len(r.min_shape)) for r in ranges]
        figure = Figure(figsize=(6.4, 0.6 + sum(0.42 * h + 0.55 for h in heights)), layout="constrained")
        panels = figure.subplots(len(ranges), 1, squeeze=False, gridspec_kw={"height_ratios": heights})[:, 0]
        for panel, shape in zip(panels, ranges, strict=True):
            _draw_ranges(panel, shape)
        figure.supxlabel("size", fontsize=9.0)
        return _svg(figure, salt)


def _draw_ranges(panel: object, shape: ShapeRange) -> None:
    from matplotlib.axes import Axes

    assert isinstance(panel, Axes)
    axes = list(range(len(shape.min_shape)))
    known = [v for v in (*shape.min_shape, *shape.max_shape) if v is not None]
    ceiling = max([*known, 1])
    for index in axes:
        low = shape.min_shape[index]
        high = shape.max_shape[index]
        unbounded = high is None
        top = ceiling if high is None else high
        panel.barh(index, max(top - low, 0) or 0.02 * ceiling, left=low, height=0.5, color="#9ecae1",
                   edgecolor="#3182bd", hatch="//" if unbounded else None)
        panel.plot([low], [index], marker="|", markersize=14, color="#08519c")
        panel.plot([top], [index], marker="|", markersize=14, color="#08519c")
        if shape.opt_shape is not None:
            panel.plot([shape.opt_shape[index]], [index], marker="o", color="#e6550d", linestyle="none")
        note = f"min {low}  opt {shape.opt_shape[index] if shape.opt_shape else '-'}  max " + (
            "unbounded" if unbounded else str(high))
        panel.text(low, index - 0.3, note, fontsize=7.5, va="bottom", ha="left", parse_math=False)
    panel.set_yticks(axes, [_axis_label(i, shape.batch_axis) for i in axes], parse_math=False)
    panel.set_ylim(-0.6, max(len(axes) - 1, 0) + 0.9)
    panel.set_xlim(0, ceiling * 1.05 + 1)
    panel.xaxis.set_major_locator(MaxNLocator(integer=True))  # sizes are whole numbers
    panel.invert_yaxis()
    panel.set_title(shape.name, loc="left", parse_math=False)


def _ceiling_line(panel: Any, ceiling: float | None, vertical: bool) -> None:
    """The model's runtime alone (its ceiling) as a dashed line, labelled, so each figure reads as a fraction of it."""
    if ceiling:
        line = panel.axvline if vertical else panel.axhline
        line(ceiling, color="#636363", linestyle="--", linewidth=1.0, label=f"ceiling {ceiling:.0f}/s")


def perf_chart(title: str, points: Sequence[PerfPoint], salt: str, ceiling: float | None = None) -> str:
    """Throughput and p50/p99 latency against concurrency, side by side, the ceiling dashed; SVG text."""
    ordered = sorted(points, key=lambda p: p.concurrency)
    levels = [p.concurrency for p in ordered]
    with matplotlib.rc_context(_rc(salt)):
        figure = Figure(figsize=(7.2, 2.8), layout="constrained")
        throughput, latency = figure.subplots(1, 2)
        throughput.plot(levels, [p.throughput for p in ordered], marker="o", color="#3182bd")
        throughput.set_xlabel("concurrency")
        throughput.set_ylabel("inferences/s")
        throughput.set_ylim(bottom=0)
        _ceiling_line(throughput, ceiling, vertical=False)
        if ceiling:
            throughput.legend(loc="lower right", fontsize=8.0)
        for key, colour in (("p50_ms", "#31a354"), ("p99_ms", "#e6550d")):
            pairs = [(p.concurrency, getattr(p, key)) for p in ordered if getattr(p, key) is not None]
            if pairs:
                latency.plot([c for c, _ in pairs], [v for _, v in pairs], marker="o", color=colour,
                             label=key.removesuffix("_ms"))
        latency.set_xlabel("concurrency")
        latency.set_ylabel("latency (ms)")
        latency.set_ylim(bottom=0)
        if latency.get_legend_handles_labels()[0]:
            latency.legend(loc="upper left", fontsize=8.0)
        for panel in (throughput, latency):
            panel.set_xticks(levels, [str(level) for level in levels])
        figure.suptitle(title, fontsize=10.0, parse_math=False)
        return _svg(figure, salt)


#: How the tune chart draws a candidate: tried, the baseline (the generated config), the best.
_TUNE_STYLES = (("tried", dict(marker="o", color="#9ecae1", edgecolor="#3182bd", s=28, zorder=2)),
                ("baseline", dict(marker="s", color="#bdbdbd", edgecolor="#252525", s=60, zorder=3)),
                ("best", dict(marker="*", color="#e6550d", edgecolor="#7f2704", s=150, zorder=4)))


def tune_chart(title: str, points: Sequence[TunePoint], salt: str, ceiling: float | None = None) -> str:
    """Per concurrency a panel of every candidate's p99 latency against its throughput, baseline and best marked.

    Up and to the left is worse: the best is the candidate furthest right within the latency budget, and the dashed
    ceiling is what the runtime does alone. SVG text.
    """
    levels = sorted({p.concurrency for p in points})
    with matplotlib.rc_context(_rc(salt)):
        figure = Figure(figsize=(3.6 * max(len(levels), 1) + 0.4, 3.0), layout="constrained")
        panels = figure.subplots(1, max(len(levels), 1), squeeze=False)[0]
        for panel, level in zip(panels, levels, strict=False):
            at = [p for p in points if p.concurrency == level]
            for role, style in _TUNE_STYLES:
                chosen = [p for p in at if (role == "best" and p.best) or (role == "baseline" and p.baseline)
                          or (role == "tried" and not p.best and not p.baseline)]
                if chosen:
                    panel.scatter([p.throughput for p in chosen], [p.p99_ms for p in chosen], label=role,
                                  **style)
            panel.set_xlabel("inferences/s")
            panel.set_ylabel("p99 latency (ms)")
            # Room around the furthest points: a marker on the frame would be cut in half.
            panel.set_xlim(0, max([p.throughput for p in at] + [ceiling or 0.0, 1.0]) * 1.12)
            _ceiling_line(panel, ceiling, vertical=True)
            panel.set_ylim(0, max([p.p99_ms for p in at] + [1.0]) * 1.18)
            panel.set_title(f"concurrency {level}", loc="left")
            panel.legend(loc="upper left", fontsize=7.5)
        figure.suptitle(title, fontsize=10.0, parse_math=False)
        return _svg(figure, salt)
