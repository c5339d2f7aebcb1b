"""Line charts as inline SVG, drawn on the server from the sampler's ring buffer (no JavaScript)."""
from html import escape

COLORS = {"ready": "#1f77b4", "owned": "#ff7f0e", "delayed": "#9467bd", "dead": "#d62728",
          "in": "#2ca02c", "out": "#1f77b4"}


def _nice_max(v: float) -> float:
    if v <= 0:
        return 1.0
    step = 1.0
    while step * 10 <= v:
        step *= 10
    while step > v:
        step /= 10
    for m in (1, 2, 5, 10):
        if m * step >= v:
            return m * step
    return 10 * step


def _fmt(v: float) -> str:
    if v >= 1e6:
        return f"{v / 1e6:g}M"
    if v >= 1e3:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def line_chart(title: str, series: dict, t0: float, t1: float, unit: str = "", width: int = 560,
               height: int = 160) -> str:
    """series: name -> [(time, value)]; the x axis runs from t0 to t1 (seconds)."""
    left, right, top, bottom = 48, 8, 22, 22
    w, h = width - left - right, height - top - bottom
    peak = max([v for pts in series.values() for _, v in pts] or [0])
    ymax = _nice_max(peak)
    span = max(t1 - t0, 1e-9)
    parts = [f'<svg class="chart" role="img" aria-label="{escape(title)}" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">',
             f'<text x="{left}" y="14" class="chart-title">{escape(title)}</text>',
             f'<rect x="{left}" y="{top}" width="{w}" height="{h}" class="chart-frame"/>']
    for frac in (0.5, 1.0):
        y = top + h - frac * h
        parts.append(f'<line x1="{left}" x2="{left + w}" y1="{y:.1f}" y2="{y:.1f}" class="chart-grid"/>')
        parts.append(f'<text x="{left - 4}" y="{y + 4:.1f}" class="chart-axis" text-anchor="end">'
                     f'{_fmt(ymax * frac)}{escape(unit)}</text>')
    parts.append(f'<text x="{left - 4}" y="{top + h + 4}" class="chart-axis" text-anchor="end">0</text>')
    ago = f"-{round(span / 60)} min" if span >= 120 else f"-{round(span)} s"
    parts.append(f'<text x="{left}" y="{height - 6}" class="chart-axis">{ago}</text>')
    parts.append(f'<text x="{left + w}" y="{height - 6}" class="chart-axis" text-anchor="end">now</text>')
    legend_x = left + w
    for name, pts in reversed(list(series.items())):
        color = COLORS.get(name, "#333")
        label = escape(name)
        legend_x -= 8 + 7 * len(name)
        parts.append(f'<text x="{legend_x}" y="14" class="chart-legend" fill="{color}">{label}</text>')
        if not pts:
            continue
        xy = " ".join(f"{left + (t - t0) / span * w:.1f},{top + h - min(v, ymax) / ymax * h:.1f}" for t, v in pts)
        parts.append(f'<polyline class="series" data-series="{label}" points="{xy}" fill="none" '
                     f'stroke="{color}" stroke-width="1.5"/>')
    parts.append("</svg>")
    return "".join(parts)
