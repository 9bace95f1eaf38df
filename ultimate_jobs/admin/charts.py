"""Internal: the overview's charts, drawn on the server as inline SVG.

No JavaScript and nothing fetched from elsewhere: the page works offline behind a firewall, and
in the dark theme (colours are CSS classes the page styles). Each bucket with attempts is one bar
per kind (done below, failed stacked above) carrying ``data-kind``, ``data-count`` and
``data-at``, with a ``<title>`` a mouse hover shows ("12:51 UTC: 3 done, 1 failed").
"""

from __future__ import annotations

from datetime import timedelta

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from ultimate_jobs.admin.display import instant
from ultimate_jobs.ops.overview import Series

WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 600, 120, 44, 16, 6


def _rate(count: float, width: int) -> str:
    value = count / (width / 60)
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


def bar_chart(series: Series, label: str) -> SafeString:
    """Done and failed attempts per bucket as stacked bars; the y axis reads attempts per minute."""
    done, failed, width = series["done"], series["failed"], series["width"]
    start = instant(series["start"])
    assert start is not None
    count = len(done)
    top = max((d + f for d, f in zip(done, failed, strict=True)), default=0) or 1
    plot_w, plot_h = WIDTH - LEFT, HEIGHT - BOTTOM - TOP
    step = plot_w / count
    bars = []
    for i, (d, f) in enumerate(zip(done, failed, strict=True)):
        if not d and not f:
            continue
        at = start + timedelta(seconds=width * i)
        tip = f"{at:%Y-%m-%d %H:%M} UTC: {d} done, {f} failed"
        x = LEFT + i * step + 0.5
        base = float(TOP + plot_h)
        for kind, n in (("done", d), ("failed", f)):
            if not n:
                continue
            h = max(1.0, plot_h * n / top)
            base -= h
            bars.append((kind, kind, n, at.isoformat().replace("+00:00", "Z"), f"{x:.1f}", f"{base:.1f}",
                         f"{max(1.0, step - 1):.1f}", f"{h:.1f}", tip))
    body = format_html_join(
        "", '<rect class="uj-bar uj-{}" data-kind="{}" data-count="{}" data-at="{}" x="{}" y="{}" width="{}" '
        'height="{}"><title>{}</title></rect>', bars)
    end = start + timedelta(seconds=width * count)
    axes = format_html(
        '<line class="uj-axis" x1="{}" y1="{}" x2="{}" y2="{}"/>'
        '<text class="uj-tick" x="{}" y="{}" text-anchor="end">{}/min</text>'
        '<text class="uj-tick" x="{}" y="{}" text-anchor="end">0</text>'
        '<text class="uj-tick" x="{}" y="{}">{}</text>'
        '<text class="uj-tick" x="{}" y="{}" text-anchor="end">{} UTC</text>',
        LEFT, TOP + plot_h, WIDTH, TOP + plot_h,
        LEFT - 4, TOP + 9, _rate(top, width),
        LEFT - 4, TOP + plot_h,
        LEFT, HEIGHT - 3, f"{start:%b %d %H:%M}" if count * width > 3 * 3600 else f"{start:%H:%M}",
        WIDTH, HEIGHT - 3, f"{end:%H:%M}")
    return format_html(
        '<svg class="uj-chart" role="img" viewBox="0 0 {} {}" aria-label="{}">'
        "<title>{}</title>{}{}</svg>", WIDTH, HEIGHT, label, label, axes, body or mark_safe(""))
