"""A small SVG line/scatter plot writer for the benchmark report (no plotting library in the
project's venv): axes with ticks, optional secondary top axis, one series per strategy with
its own colour and marker, a legend, a title and a caption saying how the data was
obtained."""

from xml.sax.saxutils import escape

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf"]
MARKERS = ["circle", "square", "diamond", "triangle", "down", "cross", "plus", "star"]


def nice_ticks(lo, hi, n=6):
    """Round tick values covering [lo, hi], about n of them."""
    import math
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = 10 * mag
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            step = m * mag
            break
    start = math.floor(lo / step) * step
    ticks = []
    k = 0
    while True:
        t = round(start + k * step, 10)
        if t > hi + step * 1e-9:
            break
        if t >= lo - step * 1e-9:
            ticks.append(t)
        k += 1
    if ticks and ticks[-1] < hi:
        ticks.append(round(ticks[-1] + step, 10))
    if ticks and ticks[0] > lo:
        ticks.insert(0, round(ticks[0] - step, 10))
    return ticks


def _marker(kind, x, y, color, size=4.5, filled=True):
    fill = color if filled else "white"
    s = size
    attrs = 'fill="%s" stroke="%s" stroke-width="1.3"' % (fill, color)
    if kind == "circle":
        return '<circle cx="%.1f" cy="%.1f" r="%.1f" %s/>' % (x, y, s, attrs)
    if kind == "square":
        return '<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" %s/>' % (x - s, y - s, 2 * s, 2 * s, attrs)
    if kind == "diamond":
        pts = [(x, y - s * 1.3), (x + s * 1.3, y), (x, y + s * 1.3), (x - s * 1.3, y)]
    elif kind == "triangle":
        pts = [(x, y - s * 1.3), (x + s * 1.2, y + s), (x - s * 1.2, y + s)]
    elif kind == "down":
        pts = [(x, y + s * 1.3), (x + s * 1.2, y - s), (x - s * 1.2, y - s)]
    elif kind == "star":
        import math
        pts = []
        for i in range(10):
            r = s * 1.5 if i % 2 == 0 else s * 0.65
            a = math.pi / 2 + i * math.pi / 5
            pts.append((x + r * math.cos(a), y - r * math.sin(a)))
    else:  # cross / plus
        d = s * 1.2
        if kind == "cross":
            return ('<path d="M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f" stroke="%s" stroke-width="2"/>'
                    % (x - d, y - d, x + d, y + d, x - d, y + d, x + d, y - d, color))
        return ('<path d="M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f" stroke="%s" stroke-width="2"/>'
                % (x - d, y, x + d, y, x, y - d, x, y + d, color))
    return '<polygon points="%s" %s/>' % (" ".join("%.1f,%.1f" % p for p in pts), attrs)


def plot(series, title, xlabel, ylabel, caption, x_range=None, y_range=None, top_axis=None,
         width=860, height=560, x_fmt="%g", y_fmt="%g", notes=()):
    """series: [{"name", "points": [(x, y, label_or_None)], "line": bool, "dashed": bool}].
    Points with y above y_range[1] are drawn on the top edge as open markers.
    top_axis: (label, function x -> text) for a secondary axis along the top."""
    ml, mr, mt, mb = 72, 210, 70 if top_axis else 50, 120
    pw, ph = width - ml - mr, height - mt - mb
    xs = [p[0] for s in series for p in s["points"]]
    ys = [p[1] for s in series for p in s["points"]]
    x0, x1 = x_range or (min(xs + [0]), max(xs + [1]))
    y0, y1 = y_range or (min(ys + [0]), max(ys + [1]))
    xt, yt = nice_ticks(x0, x1), nice_ticks(y0, y1)
    x0, x1 = min(x0, xt[0]), max(x1, xt[-1])
    y0, y1 = min(y0, yt[0]), max(y1, yt[-1])

    def X(v):
        return ml + (v - x0) / (x1 - x0) * pw

    def Y(v):
        return mt + ph - (v - y0) / (y1 - y0) * ph

    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
         'font-family="Helvetica, Arial, sans-serif" font-size="12">' % (width, height, width, height),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>' % (ml, escape(title))]
    # grid and ticks
    for t in xt:
        o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e5e5e5"/>' % (X(t), mt, X(t), mt + ph))
        o.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (X(t), mt + ph + 16, escape(x_fmt % t)))
    for t in yt:
        o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>' % (ml, Y(t), ml + pw, Y(t)))
        o.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>' % (ml - 6, Y(t) + 4, escape(y_fmt % t)))
    o.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>' % (ml, mt, pw, ph))
    if y0 < 0 < y1:
        o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#999" stroke-dasharray="3,3"/>' % (ml, Y(0), ml + pw, Y(0)))
    o.append('<text x="%.1f" y="%d" text-anchor="middle" font-size="13">%s</text>' % (ml + pw / 2, mt + ph + 36, escape(xlabel)))
    o.append('<text transform="translate(18,%.1f) rotate(-90)" text-anchor="middle" font-size="13">%s</text>' % (mt + ph / 2, escape(ylabel)))
    if top_axis:
        label, fn = top_axis
        for t in xt:
            o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#333"/>' % (X(t), mt, X(t), mt - 4))
            o.append('<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>' % (X(t), mt - 8, escape(fn(t))))
        o.append('<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>' % (ml + pw / 2, mt - 24, escape(label)))
    # series
    ly = mt + 4
    for i, s in enumerate(series):
        color = s.get("color") or PALETTE[i % len(PALETTE)]
        marker = s.get("marker") or MARKERS[i % len(MARKERS)]
        pts = sorted(s["points"], key=lambda p: (p[0], p[1]))
        if s.get("line", True) and len(pts) > 1:
            path = " ".join("%s%.1f %.1f" % ("M" if j == 0 else "L", X(p[0]), Y(min(p[1], y1))) for j, p in enumerate(pts))
            o.append('<path d="%s" fill="none" stroke="%s" stroke-width="1.6"%s opacity="0.85"/>' % (
                path, color, ' stroke-dasharray="5,3"' if s.get("dashed") else ""))
        for p in pts:
            clipped = p[1] > y1
            o.append(_marker(marker, X(p[0]), Y(min(p[1], y1)), color, filled=not clipped))
            if len(p) > 2 and p[2]:
                o.append('<text x="%.1f" y="%.1f" font-size="10" fill="%s">%s</text>' % (X(p[0]) + 6, Y(min(p[1], y1)) - 6, color, escape(p[2])))
        # legend
        o.append(_marker(marker, ml + pw + 22, ly + 6, color))
        o.append('<text x="%d" y="%d">%s</text>' % (ml + pw + 34, ly + 10, escape(s["name"])))
        ly += 20
    for j, n in enumerate(notes):
        o.append('<text x="%d" y="%d" font-size="11" fill="#555">%s</text>' % (ml + pw + 14, ly + 14 + 15 * j, escape(n)))
    import textwrap
    lines = []
    for para in caption if isinstance(caption, (list, tuple)) else [caption]:
        lines += textwrap.wrap(para, int((width - ml - 10) / 6.2)) or [""]
    for j, line in enumerate(lines):
        o.append('<text x="%d" y="%d" font-size="11" fill="#444">%s</text>' % (
            ml, height - 14 * len(lines) + 14 * j - 4, escape(line)))
    o.append("</svg>")
    return "\n".join(o) + "\n"
