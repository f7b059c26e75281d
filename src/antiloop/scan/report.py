"""The HTML report of a scan: one self-contained file that opens offline.

Everything is inline (CSS, a few lines of JavaScript, SVG charts); nothing is fetched. The
report shows the corpus summary, three charts (runs with loops by kind, the most common
fingerprints, the waste per run) and a timeline per run: one cell per step, coloured by its
operation, failed steps marked, the loop evidence outlined, the first loop point flagged and
the steps after it (the waste) hatched. Hovering a cell shows its tool and command.
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from pathlib import Path

from antiloop.scan.engine import RunScan
from antiloop.scan.summary import Summary, ranges, run_waste_text, unreadable_name, waste_text

OPERATION_COLOURS = {
    "read": "#4e79a7",
    "list": "#76b7b2",
    "grep": "#59a14f",
    "edit": "#f28e2b",
    "bash": "#9c755f",
    "test": "#b07aa1",
    "build": "#edc948",
    "web": "#17becf",
    "other": "#bab0ac",
}
"""Timeline cell colours by operation (``search`` and ``fetch`` are shown as ``web``)."""

KIND_COLOURS = {
    "repeat": "#d62728",
    "cycle": "#9467bd",
    "fail-streak": "#ff7f0e",
    "stagnation": "#8c564b",
    "max-steps": "#7f7f7f",
}

_WASTE_ROWS = 30
_LABEL_CHARS = 48

_CSS = """
:root { --fg:#1d2330; --muted:#5b6475; --line:#d9dde5; --bg:#fff; --panel:#f6f7f9; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: var(--fg); background: var(--bg); }
header, main { max-width: 1200px; margin: 0 auto; padding: 0 20px; }
header { padding-top: 18px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 26px 0 10px; }
.muted { color: var(--muted); }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 14px 0; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 8px;
        padding: 8px 14px; min-width: 130px; }
.card b { display: block; font-size: 20px; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(340px, 1fr)); gap: 16px; }
figure { margin: 0; background: var(--panel); border: 1px solid var(--line); border-radius: 8px;
         padding: 10px 12px; overflow-x: auto; }
figcaption { font-weight: 600; margin-bottom: 6px; }
svg text { font: 11px system-ui, sans-serif; fill: var(--fg); }
.legend { display: flex; flex-wrap: wrap; gap: 12px; margin: 6px 0 12px; font-size: 12px; }
.legend span { display: inline-flex; align-items: center; gap: 4px; }
.legend i { display: inline-block; width: 12px; height: 14px; border-radius: 2px; }
.controls { margin: 8px 0; }
.run { border-top: 1px solid var(--line); padding: 8px 0 10px; }
.run-head { display: flex; flex-wrap: wrap; gap: 4px 14px; align-items: baseline; }
.run-name { font-weight: 600; word-break: break-all; }
.badge { font-size: 11px; padding: 1px 6px; border-radius: 9px; color: #fff; }
.tl { display: flex; flex-wrap: wrap; gap: 2px; margin: 6px 0 4px; padding-top: 6px; }
.s { position: relative; width: 10px; height: 18px; border-radius: 2px; cursor: default; }
.s.f { box-shadow: inset 0 -5px 0 #c00; }
.s.w { background-image: repeating-linear-gradient(135deg, rgba(255,255,255,.55) 0 2px,
       transparent 2px 5px); }
.s.e { outline: 2px solid #111; outline-offset: 0; z-index: 1; }
.s.p::before { content: ""; position: absolute; left: 1px; top: -7px; border: 4px solid transparent;
       border-top: 5px solid #111; }
.s:hover { transform: scaleY(1.25); }
ul.loops { margin: 2px 0 0; padding-left: 18px; font-size: 12px; }
ul.loops code { word-break: break-all; }
#tip { position: fixed; display: none; max-width: 560px; background: #1d2330; color: #fff;
       font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; padding: 6px 8px;
       border-radius: 6px; white-space: pre-wrap; word-break: break-all; pointer-events: none;
       z-index: 10; }
body.only-loops .run[data-loops="0"] { display: none; }
"""

_JS = """
(function () {
  var tip = document.getElementById('tip');
  document.addEventListener('mouseover', function (ev) {
    var cell = ev.target.closest ? ev.target.closest('.s') : null;
    if (!cell) { tip.style.display = 'none'; return; }
    tip.textContent = cell.getAttribute('data-tip');
    tip.style.display = 'block';
  });
  document.addEventListener('mousemove', function (ev) {
    if (tip.style.display !== 'block') return;
    var x = ev.clientX + 14, y = ev.clientY + 16;
    var w = tip.offsetWidth, h = tip.offsetHeight;
    if (x + w > window.innerWidth - 8) x = Math.max(8, window.innerWidth - w - 8);
    if (y + h > window.innerHeight - 8) y = Math.max(8, ev.clientY - h - 10);
    tip.style.left = x + 'px'; tip.style.top = y + 'px';
  });
  var box = document.getElementById('only-loops');
  if (box) box.addEventListener('change', function () {
    document.body.classList.toggle('only-loops', box.checked);
  });
})();
"""


def write_html(path: Path, results: Sequence[RunScan], summary: Summary) -> None:
    """Write the report of a scan to ``path``.

    Args:
        path: the file to write.
        results: the runs scanned, with their step views (``Scanner(views=True)``).
        summary: the corpus summary of the same scan.

    Raises:
        OSError: the file cannot be written.
    """
    path.write_text(render_html(results, summary), encoding="utf-8")


def render_html(results: Sequence[RunScan], summary: Summary) -> str:
    """The report as one HTML document."""
    names = _names(results)
    ordered = sorted(
        range(len(results)),
        key=lambda i: (not results[i].loops, -results[i].waste.steps, names[i]),
    )
    parts = [
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        "<title>antiloop scan report</title>",
        f"<style>{_CSS}{_op_css()}</style></head><body>",
        "<header><h1>antiloop scan</h1>",
        f"<p class='muted'>{_summary_line(summary)}</p></header><main>",
        _cards(summary),
        _unreadable(summary),
        "<h2>Summary</h2><div class='charts'>",
        _figure("chart-kinds", "Runs with loops, by kind", _kinds_chart(summary)),
        _figure(
            "chart-fingerprints",
            "Most common fingerprints (runs)",
            _fingerprint_chart(summary),
        ),
        _figure(
            "chart-waste",
            "Steps per run: before the first loop point, and wasted after it",
            _waste_chart(results, names),
        ),
        "</div>",
        "<h2 id='timelines'>Timelines</h2>",
        _legend(),
        "<div class='controls'><label><input type='checkbox' id='only-loops'> "
        "only runs with loops</label></div>",
    ]
    parts.extend(_run_block(results[i], names[i]) for i in ordered)
    parts.append(f"</main><div id='tip' role='tooltip'></div><script>{_JS}</script>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _names(results: Sequence[RunScan]) -> list[str]:
    """Each run's file relative to the files' common folder, with ``#record`` when set."""
    files = [r.file for r in results]
    base = ""
    if files:
        try:
            base = os.path.commonpath([str(Path(f).parent) for f in files])
        except ValueError:
            base = ""
    out = []
    for r in results:
        name = os.path.relpath(r.file, base) if base else r.file
        out.append(name + (f"#{r.record}" if r.record is not None else ""))
    return out


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _summary_line(summary: Summary) -> str:
    unreadable = f"; {len(summary.unreadable)} unreadable" if summary.unreadable else ""
    return _esc(
        f"{summary.runs} runs, {summary.steps} steps, {summary.files} files{unreadable}. "
        f"Waste after the first loop point: {waste_text(summary)}."
    )


def _cards(summary: Summary) -> str:
    share = f"{100 * summary.runs_with_loops / summary.runs:.0f}%" if summary.runs else "-"
    cards = [
        ("runs", summary.runs),
        ("runs with loops", f"{summary.runs_with_loops} ({share})"),
        ("loops", summary.loops),
        ("wasted steps", f"{summary.waste_steps} of {summary.steps}"),
    ]
    if summary.unreadable:
        cards.append(("unreadable", len(summary.unreadable)))
    if summary.waste_input_tokens is not None or summary.waste_output_tokens is not None:
        tokens = (summary.waste_input_tokens or 0) + (summary.waste_output_tokens or 0)
        cards.append(("wasted tokens", f"{tokens:,}"))
    if summary.waste_cost_usd is not None:
        cards.append(("wasted cost", f"${summary.waste_cost_usd:,.2f}"))
    body = "".join(f"<div class='card'><b>{_esc(v)}</b>{_esc(k)}</div>" for k, v in cards)
    return f"<div class='cards' id='cards'>{body}</div>"


def _unreadable(summary: Summary) -> str:
    """The inputs that could not be read, each with its reason; empty when there are none."""
    if not summary.unreadable:
        return ""
    rows = "".join(
        f"<li><code>{_esc(unreadable_name(u))}</code> <span class='muted'>{_esc(u.reason)}</span>"
        "</li>"
        for u in summary.unreadable
    )
    return (
        f"<section id='unreadable'><h2>Unreadable ({len(summary.unreadable)})</h2>"
        "<p class='muted'>Not counted as runs: of no known format, or read as no steps.</p>"
        f"<ul class='loops'>{rows}</ul></section>"
    )


def _figure(ident: str, caption: str, svg: str) -> str:
    return f"<figure id='{ident}'><figcaption>{_esc(caption)}</figcaption>{svg}</figure>"


def _short(text: str, limit: int = _LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _bars(rows: Sequence[tuple[str, Sequence[tuple[int, str]], str]], label_width: int) -> str:
    """Horizontal (stacked) bars: per row a label, segments of (value, colour), a title."""
    if not rows:
        return "<p class='muted'>Nothing to show: no loops found.</p>"
    bar_width, row_h = 300, 20
    top = max(sum(v for v, _ in segs) for _, segs, _ in rows) or 1
    height = row_h * len(rows) + 4
    width = label_width + bar_width + 60
    out = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' role='img' style='max-width:100%;height:auto'>"
    ]
    for n, (label, segs, title) in enumerate(rows):
        y = n * row_h + 2
        out.append(f"<g><title>{_esc(title)}</title>")
        out.append(
            f"<text x='{label_width - 6}' y='{y + 13}' text-anchor='end'>{_esc(label)}</text>"
        )
        x = float(label_width)
        for value, colour in segs:
            w = bar_width * value / top
            if w > 0:
                out.append(
                    f"<rect x='{x:.1f}' y='{y}' width='{max(w, 1):.1f}' height='{row_h - 5}' "
                    f"fill='{colour}' rx='2'/>"
                )
            x += w
        total = "+".join(str(v) for v, _ in segs) if len(segs) > 1 else str(segs[0][0])
        out.append(f"<text x='{x + 5:.1f}' y='{y + 13}'>{_esc(total)}</text></g>")
    out.append("</svg>")
    return "".join(out)


def _kinds_chart(summary: Summary) -> str:
    rows: list[tuple[str, Sequence[tuple[int, str]], str]] = [
        (
            kind,
            [(runs, KIND_COLOURS.get(kind, "#7f7f7f"))],
            f"{kind}: {runs} runs, {summary.loops_by_kind[kind]} loops",
        )
        for kind, runs in sorted(summary.runs_by_kind.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    if rows:
        none = summary.runs - summary.runs_with_loops
        rows.append(("no loop", [(none, "#c7ccd6")], f"{none} runs without a loop"))
    return _bars(rows, 90)


def _fingerprint_chart(summary: Summary) -> str:
    rows: list[tuple[str, Sequence[tuple[int, str]], str]] = [
        (
            _short(_fingerprint_label(fp), 40),
            [(runs, KIND_COLOURS.get(summary.fingerprint_kind[fp], "#7f7f7f"))],
            f"{fp} ({runs} runs)",
        )
        for fp, runs in summary.top_fingerprints()
    ]
    return _bars(rows, 260)


def _fingerprint_label(fp: str) -> str:
    """The fingerprint without its ``AGENT::<agent>::`` prefix."""
    parts = fp.split("::", 2)
    return parts[2] if len(parts) == 3 and parts[0] == "AGENT" else fp


def _waste_chart(results: Sequence[RunScan], names: Sequence[str]) -> str:
    wasted = sorted(
        (i for i, r in enumerate(results) if r.waste.from_step is not None),
        key=lambda i: (-results[i].waste.steps, names[i]),
    )
    rows: list[tuple[str, Sequence[tuple[int, str]], str]] = []
    for i in wasted[:_WASTE_ROWS]:
        r = results[i]
        kept = r.steps - r.waste.steps
        rows.append(
            (
                _run_label(names[i]),
                [(kept, "#9aa5b8"), (r.waste.steps, "#d62728")],
                f"{names[i]}: {kept} steps up to the loop point, {r.waste.steps} wasted after it",
            )
        )
    svg = _bars(rows, 220)
    more = len(wasted) - _WASTE_ROWS
    if more > 0:
        svg += f"<p class='muted'>and {more} more runs with waste.</p>"
    return svg


def _run_label(name: str, limit: int = 34) -> str:
    """A short label for a run: its file name without trace suffixes, ``#record`` kept."""
    base, _, record = name.rpartition("/")[2].partition("#")
    for suffix in (".traj.json", ".jsonl", ".json", ".traj"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
            break
    label = base + (f"#{record}" if record else "")
    return label if len(label) <= limit else "…" + label[-(limit - 1) :]


def _legend() -> str:
    items = [
        f"<span><i style='background:{c}'></i>{_esc(op)}</span>"
        for op, c in OPERATION_COLOURS.items()
    ]
    items += [
        "<span><i style='background:#bab0ac;box-shadow:inset 0 -5px 0 #c00'></i>failed</span>",
        "<span><i style='background:#bab0ac;outline:2px solid #111'></i>loop evidence</span>",
        "<span>&#9660; first loop point</span>",
        "<span><i style='background:#bab0ac;background-image:repeating-linear-gradient(135deg,"
        "rgba(255,255,255,.55) 0 2px,transparent 2px 5px)'></i>after it (waste)</span>",
    ]
    return f"<div class='legend'>{''.join(items)}</div>"


def _op_css() -> str:
    return "".join(f".o-{op}{{background-color:{c}}}" for op, c in OPERATION_COLOURS.items())


def _op_class(operation: str) -> str:
    if operation in ("search", "fetch"):
        return "web"
    return operation if operation in OPERATION_COLOURS else "other"


def _run_block(result: RunScan, name: str) -> str:
    evidence: dict[int, list[str]] = {}
    for loop in result.loops:
        for i in loop.evidence:
            evidence.setdefault(i, []).append(loop.detector)
    point = result.waste.from_step
    cells = []
    for i, view in enumerate(result.views):
        op = _op_class(view.operation)
        classes = ["s", f"o-{op}"]
        if view.failed:
            classes.append("f")
        if i in evidence:
            classes.append("e")
        if point is not None and i == point:
            classes.append("p")
        if point is not None and i > point:
            classes.append("w")
        tip = f"step {i} · {view.tool}"
        if view.operation != view.tool.lower():
            tip += f" ({view.operation})"
        if view.failed:
            tip += " · failed"
        if i in evidence:
            tip += f" · loop: {', '.join(evidence[i])}"
        if point is not None and i == point:
            tip += " · first loop point"
        tip += f"\n{view.command}"
        cells.append(
            f"<span class='{' '.join(classes)}' data-i='{i}' data-tip='{_esc(tip)}'></span>"
        )
    badges = "".join(
        f"<span class='badge' style='background:{KIND_COLOURS.get(k, '#7f7f7f')}'>{_esc(k)}</span>"
        for k in sorted({loop.detector for loop in result.loops})
    )
    info = f"{result.format} · {result.steps} steps"
    if point is not None:
        info += f" · first loop point: step {point} · waste: {run_waste_text(result.waste)}"
    loops = "".join(
        f"<li>step {loop.step} <b>{_esc(loop.detector)}</b> <code>{_esc(loop.fingerprint or '-')}"
        f"</code> <span class='muted'>evidence: {_esc(ranges(loop.evidence))}</span></li>"
        for loop in result.loops
    )
    return (
        f"<div class='run' data-loops='{len(result.loops)}'>"
        f"<div class='run-head'><span class='run-name'>{_esc(name)}</span>{badges}"
        f"<span class='muted'>{_esc(info)}</span></div>"
        f"<div class='tl'>{''.join(cells)}</div>"
        + (f"<ul class='loops'>{loops}</ul>" if loops else "")
        + "</div>"
    )
