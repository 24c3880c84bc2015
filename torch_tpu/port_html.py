"""The porting report as one self-contained HTML page: inline CSS, inline SVG bar charts, no
script and no external resource, so it can be mailed or attached as it is. It renders the
section dicts of port.sections (title, status, text, columns, rows, optional chart)."""
from html import escape

COLOURS = {"green": "#2e7d32", "amber": "#ef8f00", "red": "#c62828", "info": "#1565c0"}
CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;
vertical-align:top}th{background:#f3f3f3}code{font-size:12px}.badge{color:#fff;border-radius:3px;padding:1px 7px}"""


def _badge(status):
    return f'<span class="badge" style="background:{COLOURS[status]}">{escape(status)}</span>'


def _table(columns, rows):
    """rows: cells already in HTML."""
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def bar_chart(bars, unit, colour="#1565c0"):
    """Horizontal bars, [(label, value)] in order, scaled to the largest."""
    bars = [(label, v) for label, v in bars if v > 0]
    if not bars:
        return ""
    top, row, label_w, bar_w = max(v for _, v in bars), 22, 330, 420
    parts = []
    for i, (label, v) in enumerate(bars):
        y, w = i * row, max(1.0, bar_w * v / top)
        parts.append(f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end" font-size="12">'
                     f'{escape(label[:48])}</text>'
                     f'<rect x="{label_w}" y="{y + 4}" width="{w:.1f}" height="14" fill="{colour}"/>'
                     f'<text x="{label_w + w + 4:.1f}" y="{y + 15}" font-size="12">{v:.3g} {escape(unit)}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 110}" height="{row * len(bars) + 6}">'
            + "".join(parts) + "</svg>")


def _section(s):
    chart = bar_chart(s["chart"], s["unit"], COLOURS[s["status"]]) if s.get("chart") else ""
    rows = [[escape(str(c)) for c in row] for row in s["rows"]]
    table = _table(s["columns"], rows) if rows else "<p>Nothing found.</p>"
    return f"<h2>{escape(s['title'])} {_badge(s['status'])}</h2><p>{escape(s['text'])}</p>{chart}{table}"


def page(title, sections):
    summary = _table(["section", "status", "findings"],
                     [[escape(s["title"]), _badge(s["status"]), len(s["rows"])] for s in sections])
    body = "".join(_section(s) for s in sections)
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{escape(title)}</title><style>{CSS}</style>'
            f"</head><body><h1>{escape(title)}</h1>{summary}{body}</body></html>\n")
