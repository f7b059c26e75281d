"""The HTML report of a scan: one self-contained file that opens offline.

Everything is inline (CSS, a few lines of JavaScript, SVG charts); nothing is fetched. The
report shows the corpus summary, three charts (runs with loops by kind, the most common
fingerprints, the waste per run) and a timeline per run: one cell per step, coloured by its
operation, failed steps marked, the loop evidence outlined, the first loop point flagged and
the steps after it (the waste) hatched. Hovering a cell shows its tool and command; a click, or
Enter on a cell reached with Tab and the arrow keys, shows it under the timeline. The chart bars
are buttons (a fingerprint's bar searches the timelines for it), and a search box keeps the runs
whose loop fingerprints hold the text.
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from pathlib import Path

from antiloop.scan.engine import RunScan
from antiloop.scan.summary import Summary, ranges, unreadable_name

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
:root { --fg:#1d2330; --muted:#5b6475; --line:#d9dde5; --bg:#fff; --panel:#f6f7f9;
        --focus:#1849a9; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: var(--fg); background: var(--bg); overflow-wrap: anywhere; }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
header, main { max-width: 1200px; margin: 0 auto; padding: 0 16px; }
header { padding-top: 18px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 26px 0 10px; }
.muted { color: var(--muted); }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 14px 0; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 8px;
        padding: 8px 14px; min-width: 130px; }
.card b { display: block; font-size: 20px; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 360px), 1fr));
          gap: 16px; }
figure { margin: 0; background: var(--panel); border: 1px solid var(--line); border-radius: 8px;
         padding: 10px 12px; min-width: 0; }
figcaption { font-weight: 600; margin-bottom: 8px; }
.bars { display: grid; gap: 3px; }
.bar { display: grid; grid-template-columns: minmax(5em, 40%) 1fr; gap: 2px 10px;
       align-items: center; width: 100%; font: 13px/1.3 system-ui, sans-serif; color: var(--fg);
       text-align: left; background: none; border: 0; border-radius: 4px; padding: 3px 4px;
       cursor: pointer; }
.bar:hover, .bar[aria-pressed='true'] { background: #e6e9ef; }
.bar-label { text-align: right; overflow-wrap: anywhere; }
#chart-fingerprints .bar { grid-template-columns: minmax(8em, 62%) 1fr; }
#chart-fingerprints .bar-label { text-align: left; font-family: ui-monospace, Menlo, monospace;
                                 font-size: 12px; }
.bar-track { display: flex; align-items: center; gap: 6px; min-width: 0; }
.segs { display: flex; flex: none; max-width: calc(100% - 4.5em); height: 14px; border-radius: 2px;
        overflow: hidden; }
.seg { display: block; height: 14px; }
.bar-value { font-variant-numeric: tabular-nums; white-space: nowrap; }
.detail { margin-top: 8px; padding: 6px 8px; background: #fff; border: 1px solid var(--line);
          border-radius: 6px; font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, monospace;
          white-space: pre-wrap; word-break: break-all; }
.legend { display: flex; flex-wrap: wrap; gap: 6px 14px; margin: 6px 0 12px; font-size: 13px; }
.legend span { display: inline-flex; align-items: center; gap: 4px; }
.legend i { display: inline-block; width: 12px; height: 14px; border-radius: 2px; }
.controls { display: flex; flex-wrap: wrap; gap: 8px 18px; align-items: center; margin: 8px 0; }
.controls input[type=search] { font: inherit; padding: 4px 10px; border: 1px solid #b9c0cc;
       border-radius: 6px; width: min(100%, 32em); }
.run { border-top: 1px solid var(--line); padding: 8px 0 10px; }
.run.hide { display: none; }
.run-head { display: flex; flex-wrap: wrap; gap: 4px 14px; align-items: baseline; }
.run-name { font-weight: 600; word-break: break-all; }
.badge { font-size: 12px; padding: 1px 6px; border-radius: 9px; color: #fff; }
.tl { display: flex; flex-wrap: wrap; gap: 2px; margin: 6px 0 4px; padding-top: 6px; }
.s { position: relative; width: 10px; height: 18px; border-radius: 2px; cursor: pointer; }
.s.f { box-shadow: inset 0 -5px 0 #c00; }
.s.n { opacity: .35; }
.s.w { background-image: repeating-linear-gradient(135deg, rgba(255,255,255,.55) 0 2px,
       transparent 2px 5px); }
.s.e { outline: 2px solid #111; outline-offset: 0; z-index: 1; }
.s.p::before { content: ""; position: absolute; left: 1px; top: -7px; border: 4px solid transparent;
       border-top: 5px solid #111; }
.s:hover, .s.sel { transform: scaleY(1.25); }
.s.sel { box-shadow: 0 0 0 2px #fff, 0 0 0 4px var(--focus); z-index: 2; }
.s:focus-visible { outline: 3px solid var(--focus); outline-offset: 1px; z-index: 3; }
ul.loops { margin: 2px 0 0; padding-left: 18px; font-size: 13px; }
ul.loops code { word-break: break-all; }
ul.loops li.match code { background: #fff3b0; }
#tip { position: fixed; display: none; max-width: min(560px, 92vw); background: #1d2330;
       color: #fff; font: 13px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; padding: 6px 8px;
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

  // Timelines: one tab stop each (the first loop point, else the first step); the arrow keys,
  // Home and End move along it; a click, Enter or Space shows the step under the timeline.
  function show(cell) {
    var run = cell.closest('.run'), box = run.querySelector('.detail');
    var old = run.querySelector('.s.sel');
    if (old) { old.classList.remove('sel'); old.setAttribute('aria-pressed', 'false'); }
    cell.classList.add('sel');
    cell.setAttribute('aria-pressed', 'true');
    box.textContent = cell.getAttribute('data-tip');
    box.hidden = false;
  }
  function hide(cell) {
    var run = cell.closest('.run');
    run.querySelector('.detail').hidden = true;
    var old = run.querySelector('.s.sel');
    if (old) { old.classList.remove('sel'); old.setAttribute('aria-pressed', 'false'); }
  }
  function move(cell, to) {
    if (!to) return;
    cell.tabIndex = -1; to.tabIndex = 0; to.focus();
    if (cell.classList.contains('sel')) show(to);
  }
  var tls = document.querySelectorAll('.tl');
  for (var i = 0; i < tls.length; i++) {
    var start = tls[i].querySelector('.s.p') || tls[i].querySelector('.s');
    if (start) start.tabIndex = 0;
  }
  document.addEventListener('click', function (ev) {
    var cell = ev.target.closest ? ev.target.closest('.s') : null;
    if (cell) { var cur = cell.parentNode.querySelector('.s[tabindex="0"]');
                if (cur && cur !== cell) cur.tabIndex = -1;
                cell.tabIndex = 0; show(cell); }
    var bar = ev.target.closest ? ev.target.closest('.bar') : null;
    if (bar) pick(bar);
  });
  document.addEventListener('keydown', function (ev) {
    var cell = ev.target.closest ? ev.target.closest('.s') : null;
    if (!cell) return;
    var k = ev.key, cells = cell.parentNode.children, next = cell.nextElementSibling;
    var back = cell.previousElementSibling;
    var to = {ArrowRight: next, ArrowDown: next, ArrowLeft: back, ArrowUp: back,
              Home: cells[0], End: cells[cells.length - 1]};
    if (k === 'Enter' || k === ' ') { ev.preventDefault(); show(cell); }
    else if (k === 'Escape') hide(cell);
    else if (k in to) { ev.preventDefault(); move(cell, to[k]); }
  });

  // Chart bars are buttons: a click (or Enter/Space) shows the bar's details under the chart;
  // a fingerprint's bar also searches the timelines for it, a run's bar goes to its timeline.
  function pick(bar) {
    var fig = bar.closest('figure'), box = fig.querySelector('.detail');
    var old = fig.querySelector('.bar[aria-pressed="true"]');
    if (old) old.setAttribute('aria-pressed', 'false');
    bar.setAttribute('aria-pressed', 'true');
    box.textContent = bar.getAttribute('data-detail');
    box.hidden = false;
    var fp = bar.getAttribute('data-fp');
    if (fp) { search.value = fp; filter(); }
    var run = bar.getAttribute('data-run');
    if (run) { var target = document.getElementById(run);
               if (target.classList.contains('hide')) { search.value = ''; filter(); }
               target.scrollIntoView();
               var first = target.querySelector('.s[tabindex="0"]'); if (first) first.focus(); }
  }

  var box = document.getElementById('only-loops');
  if (box) box.addEventListener('change', function () {
    document.body.classList.toggle('only-loops', box.checked);
  });
  var search = document.getElementById('fp-search'), count = document.getElementById('fp-count');
  var runs = document.querySelectorAll('.run');
  function filter() {
    var q = search.value.trim().toLowerCase(), n = 0;
    for (var i = 0; i < runs.length; i++) {
      var run = runs[i], hit = !q || (run.getAttribute('data-fps') || '').indexOf(q) >= 0;
      run.classList.toggle('hide', !hit);
      if (hit && q) n++;
      var items = run.querySelectorAll('ul.loops li[data-fp]');
      for (var j = 0; j < items.length; j++)
        items[j].classList.toggle('match', !!q && items[j].getAttribute('data-fp').indexOf(q) >= 0);
    }
    var said = n + (n === 1 ? ' run has' : ' runs have') + ' a matching fingerprint';
    count.textContent = q ? said : '';
  }
  if (search) search.addEventListener('input', filter);
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
        _partial(summary),
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
        _controls(summary),
    ]
    parts.extend(_run_block(results[i], names[i], i) for i in ordered)
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
        f"Waste after the first loop point: {summary.waste.text()}."
    )


def _cards(summary: Summary) -> str:
    share = f"{100 * summary.runs_with_loops / summary.runs:.0f}%" if summary.runs else "-"
    cards = [
        ("runs", summary.runs),
        ("runs with loops", f"{summary.runs_with_loops} ({share})"),
        ("loops", summary.loops),
    ]
    warned = summary.runs_with_loops - summary.runs_stopping
    if warned:  # runs printed as "warnings only": their loops ask, none stops the run
        cards.append(("runs with warnings only", warned))
    cards += [
        ("wasted steps", f"{summary.waste.steps} of {summary.steps}"),
    ]
    if summary.unreadable:
        cards.append(("unreadable", len(summary.unreadable)))
    if summary.partial:
        cards.append(("partial runs", len(summary.partial)))
    waste = summary.waste
    if waste.input_tokens is not None or waste.output_tokens is not None:
        tokens = (waste.input_tokens or 0) + (waste.output_tokens or 0)
        cards.append(("wasted tokens", f"{tokens:,}"))
    if waste.cost_usd is not None:
        cards.append(("wasted cost", f"${waste.cost_usd:,.2f}"))
    if summary.spend.input_tokens is not None or summary.spend.cost_usd is not None:
        cards.append(("spend", summary.spend.text()))
        cards.append(("spent inside loops", summary.loop_spend.text()))
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


def _partial(summary: Summary) -> str:
    """The runs read with some results missing, each with its reason; empty when none."""
    if not summary.partial:
        return ""
    rows = "".join(
        f"<li><code>{_esc(name)}</code> <span class='muted'>{_esc(why)}</span></li>"
        for name, why in summary.partial
    )
    return (
        f"<section id='partial'><h2>Partial runs ({len(summary.partial)})</h2>"
        "<p class='muted'>Counted as runs. A step whose result was not found is judged as "
        "unknown (never the same result as another step), not as an empty output; it is "
        "marked <i>no result</i> on its timeline.</p>"
        f"<ul class='loops'>{rows}</ul></section>"
    )


def _figure(ident: str, caption: str, chart: str) -> str:
    return (
        f"<figure id='{ident}'><figcaption>{_esc(caption)}</figcaption>{chart}"
        "<div class='detail' aria-live='polite' hidden></div></figure>"
    )


def _controls(summary: Summary) -> str:
    """The filters above the timelines: runs with loops only, and a search by fingerprint."""
    options = "".join(f"<option value='{_esc(fp)}'>" for fp, _ in summary.top_fingerprints())
    return (
        "<div class='controls'><label><input type='checkbox' id='only-loops'> "
        "only runs with loops</label>"
        "<label for='fp-search'>Fingerprint</label>"
        "<input type='search' id='fp-search' list='fp-list' autocomplete='off' "
        "placeholder='search by fingerprint, e.g. grep::needle'>"
        f"<datalist id='fp-list'>{options}</datalist>"
        "<span id='fp-count' class='muted' aria-live='polite'></span></div>"
        "<p class='muted'>Click a step, or Tab to a timeline and use the arrow keys and "
        "Enter, to read it.</p>"
    )


def _short(text: str, limit: int = _LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


Bar = tuple[str, Sequence[tuple[int, str]], str, dict[str, str]]
"""A chart row: its label, segments of (value, colour), its details, and data attributes."""


def _bars(rows: Sequence[Bar]) -> str:
    """Horizontal (stacked) bars as buttons: the labels are text, readable at any width."""
    if not rows:
        return "<p class='muted'>Nothing to show: no loops found.</p>"
    top = max(sum(v for v, _ in segs) for _, segs, _, _ in rows) or 1
    out = ["<div class='bars'>"]
    for label, segs, detail, data in rows:
        attrs = "".join(f" data-{k}='{_esc(v)}'" for k, v in data.items())
        whole = sum(v for v, _ in segs) or 1
        parts = "".join(
            f"<span class='seg' style='width:{100 * v / whole:.1f}%;background:{c}'></span>"
            for v, c in segs
            if v > 0
        )
        width = max(80 * whole / top, 0.5)
        bars = f"<span class='segs' style='width:{width:.1f}%'>{parts}</span>"
        total = "+".join(str(v) for v, _ in segs) if len(segs) > 1 else str(segs[0][0])
        out.append(
            f"<button type='button' class='bar' aria-pressed='false' "
            f"data-detail='{_esc(detail)}'{attrs} aria-label='{_esc(f'{label}: {total}')}'>"
            f"<span class='bar-label'>{_esc(label)}</span>"
            f"<span class='bar-track'>{bars}<span class='bar-value'>{_esc(total)}</span></span>"
            "</button>"
        )
    out.append("</div>")
    return "".join(out)


def _kinds_chart(summary: Summary) -> str:
    rows: list[Bar] = [
        (
            kind,
            [(runs, KIND_COLOURS.get(kind, "#7f7f7f"))],
            f"{kind}: {runs} runs, {summary.loops_by_kind[kind]} loops",
            {},
        )
        for kind, runs in sorted(summary.runs_by_kind.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    if rows:
        none = summary.runs - summary.runs_with_loops
        rows.append(("no loop", [(none, "#c7ccd6")], f"{none} runs without a loop", {}))
    return _bars(rows)


def _fingerprint_chart(summary: Summary) -> str:
    rows: list[Bar] = [
        (
            _short(_fingerprint_label(fp), 40),
            [(runs, KIND_COLOURS.get(summary.fingerprint_kind[fp], "#7f7f7f"))],
            f"{fp}\n{runs} runs; their timelines are shown below.",
            {"fp": fp},
        )
        for fp, runs in summary.top_fingerprints()
    ]
    return _bars(rows)


def _fingerprint_label(fp: str) -> str:
    """The fingerprint without its ``AGENT::<agent>::`` prefix."""
    parts = fp.split("::", 2)
    return parts[2] if len(parts) == 3 and parts[0] == "AGENT" else fp


def _waste_chart(results: Sequence[RunScan], names: Sequence[str]) -> str:
    wasted = sorted(
        (i for i, r in enumerate(results) if r.waste.from_step is not None),
        key=lambda i: (-results[i].waste.steps, names[i]),
    )
    rows: list[Bar] = []
    for i in wasted[:_WASTE_ROWS]:
        r = results[i]
        kept = r.steps - r.waste.steps
        rows.append(
            (
                _run_label(names[i]),
                [(kept, "#9aa5b8"), (r.waste.steps, "#d62728")],
                f"{names[i]}: {kept} steps up to the loop point, {r.waste.steps} wasted after it",
                {"run": f"run-{i}"},
            )
        )
    chart = _bars(rows)
    more = len(wasted) - _WASTE_ROWS
    if more > 0:
        chart += f"<p class='muted'>and {more} more runs with waste.</p>"
    return chart


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
        "<span><i style='background:#bab0ac;opacity:.35'></i>no result found</span>",
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


def _run_block(result: RunScan, name: str, number: int) -> str:
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
        if view.no_result:
            classes.append("n")
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
        if view.no_result:
            tip += " · no result found"
        if i in evidence:
            tip += f" · loop: {', '.join(evidence[i])}"
        if point is not None and i == point:
            tip += " · first loop point"
        tip += f"\n{view.command}"
        cells.append(
            f"<span class='{' '.join(classes)}' data-i='{i}' data-tip='{_esc(tip)}' "
            f"role='button' aria-label='step {i}'></span>"
        )
    badges = "".join(
        f"<span class='badge' style='background:{KIND_COLOURS.get(k, '#7f7f7f')}'>{_esc(k)}</span>"
        for k in sorted({loop.detector for loop in result.loops})
    )
    info = f"{result.format} · {result.steps} steps"
    if point is not None:
        info += f" · first loop point: step {point} · waste: {result.waste.text()}"
    loops = "".join(
        f"<li data-fp='{_esc((loop.fingerprint or '').lower())}'>step {loop.step} "
        f"<b>{_esc(loop.detector)}</b> <code>{_esc(loop.fingerprint or '-')}</code> "
        f"<span class='muted'>evidence: {_esc(ranges(loop.evidence))}</span></li>"
        for loop in result.loops
    )
    fingerprints = "\n".join(sorted({(loop.fingerprint or "").lower() for loop in result.loops}))
    return (
        f"<div class='run' id='run-{number}' data-loops='{len(result.loops)}' "
        f"data-fps='{_esc(fingerprints)}'>"
        f"<div class='run-head'><span class='run-name'>{_esc(name)}</span>{badges}"
        f"<span class='muted'>{_esc(info)}</span></div>"
        f"<div class='tl' role='group' aria-label='{_esc(f'timeline of {name}')}'>"
        f"{''.join(cells)}</div><div class='detail' aria-live='polite' hidden></div>"
        + (f"<ul class='loops'>{loops}</ul>" if loops else "")
        + "</div>"
    )
