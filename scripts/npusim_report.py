"""Reading npusim's report JSON for the plotting scripts: one place for its checks and error messages."""
import json
import math
import os
import sys


def fail(msg):
    """A clear one-line error naming the script, exit status 2 (no traceback)."""
    print(f"{os.path.basename(sys.argv[0])}: error: {msg}", file=sys.stderr)
    sys.exit(2)


def pyplot():
    """matplotlib's pyplot on the Agg backend (files only), or one sentence and exit 2 when this Python
    lacks matplotlib (or numpy): scripts/install-deps.sh installs them for /usr/bin/python3."""
    try:
        import matplotlib
        import numpy  # noqa: F401  (every plot uses it)
    except ImportError as e:
        fail(f"{e.name or 'matplotlib'} is not installed for {sys.executable}; run the script with /usr/bin/python3 "
             f"(scripts/install-deps.sh installs matplotlib and numpy for it)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def run_title(r, path):
    """What a plot of report `r` shows, for its title: the model and configuration the report records
    (`run`), e.g. 'mobilenet_v2.onnx on tpu-v1 +2 --set'; a report from before they were recorded: its
    file name."""
    run = r.get("run")
    if not isinstance(run, dict) or not run.get("model"):
        return os.path.basename(path)
    sets = run.get("sets") or []
    return (f"{os.path.basename(run['model'])} on {run.get('config') or 'edge'}"
            + (f" +{len(sets)} --set" if sets else ""))


def read_report(path):
    """The report written by `npusim run --report FILE.json`; fails clearly on any other file."""
    try:
        with open(path, encoding="utf-8") as f:
            r = json.load(f)
    except OSError as e:
        fail(f"cannot open {path}: {e.strerror}")
    except (json.JSONDecodeError, UnicodeDecodeError):
        fail(f"{path} is not JSON; give the report written by `npusim run --report FILE.json`")
    if not isinstance(r, dict) or "total_cycles" not in r or not isinstance(r.get("layers"), list):
        fail(f"{path} is JSON but not an npusim report (no total_cycles and layers[])")
    return r


def short_name(name):
    """A layer's ONNX path without the scopes that only repeat the next one and without the trailing op:
    '/features/features.2/conv/conv.1/conv.1.0/Conv' -> 'features.2/conv.1.0' (the first step of
    npusim's display names, isa/layer_names.h; for names read from a trace, which carries full names)."""
    parts = [p for p in name.split("/") if p]
    if len(parts) > 1:
        parts = parts[:-1]  # the op type ('Conv', 'Gemm'), shown separately
    keep = [p for i, p in enumerate(parts) if not (i + 1 < len(parts) and parts[i + 1].startswith(p))]
    return "/".join(keep) or name


def display_name(layer):
    """The name npusim's summary and layer CSV show for a report layer: its `display_name` (short and
    unique, isa/layer_names.h), or for a report from before it existed the short form of its name."""
    return layer.get("display_name") or short_name(layer["name"])


def human(v, digits=3):
    """The one number format of every tick, colour bar and cell label: three significant digits (more
    where ticks would otherwise repeat a label), plain below 1000, with k, M, G, T above (0.25, 37.8, 512,
    524k, 67.1M), never powers of ten."""
    a = abs(v)
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= scale:
            return f"{v / scale:.{digits}g}{suffix}"
    return f"{v:.{digits}g}"


def distinct_digits(values):
    """The fewest significant digits (3 to 6) that give each of `values` its own label in `human`."""
    for d in range(3, 7):
        if len({human(x, d) for x in values}) == len(set(values)):
            return d
    return 6


def log_tick_label(v, lo, hi):
    """Whether a tick at v on a base-10 log axis viewing lo..hi gets a label: within a decade every tick,
    over up to three decades the 1-2-5 ticks, over more the powers of ten alone. Labelling every minor
    tick of a wider view piled 6, 7, 8, 9 into each other; labelling none left an axis spanning 1.6 to 30
    with the one label 10 (nothing below 2)."""
    if v <= 0 or lo <= 0 or hi <= lo:
        return False
    decades = math.log10(hi / lo)
    mantissa = v / 10 ** math.floor(math.log10(v) + 1e-9)
    if decades < 1:
        return True
    first = round(mantissa)
    if abs(mantissa - first) > 1e-6:
        return False
    return first == 1 or (decades <= 3 and first in (2, 5))


def FineLogLocator():
    """The minor ticks of a base-10 log axis: 2..9 of each decade, and also 1.2, 1.5 and 2.5 when the view
    spans less than a decade (a Pareto area axis from 1.1 to 6 mm2 had no tick below 2)."""
    import numpy as np
    from matplotlib.ticker import LogLocator

    class Fine(LogLocator):
        def tick_values(self, vmin, vmax):
            lo, hi = sorted((vmin, vmax))
            narrow = lo > 0 and hi / lo < 10
            self.set_params(subs=np.array([1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9]) if narrow
                            else np.arange(2.0, 10.0))
            return super().tick_values(vmin, vmax)

    return Fine(base=10)


def plain_ticks(axis, minor=True):
    """Tick labels of an axis (log or linear) in the one format, `human`. A base-10 log axis labels the
    ticks log_tick_label picks, decided when drawn (the view is known then); matplotlib's own minor labels
    (2x10^0) would mix a second format in. minor=False leaves a linear axis's minor ticks unlabelled."""
    from matplotlib.ticker import FuncFormatter
    f = FuncFormatter(lambda v, _: human(v, distinct_digits(list(axis.get_majorticklocs()))))
    if axis.get_scale() != "log" or getattr(axis.get_transform(), "base", 10) != 10:
        axis.set_major_formatter(f)
        if minor:
            axis.set_minor_formatter(f)
        return

    axis.set_minor_locator(FineLogLocator())

    def picked(v, _):
        lo, hi = sorted(axis.get_view_interval())
        if not log_tick_label(v, lo, hi):
            return ""
        shown = [t for t in list(axis.get_majorticklocs()) + list(axis.get_minorticklocs())
                 if lo <= t <= hi and log_tick_label(t, lo, hi)]
        return human(v, distinct_digits(shown))

    axis.set_major_formatter(FuncFormatter(picked))
    axis.set_minor_formatter(FuncFormatter(picked))


def fit_title(fig, text):
    """Wraps a title (the Text that set_title or suptitle returned) at spaces onto more lines until it lies
    within the figure: a long one (model, configuration, precision plan, what was left out) was cut at both
    edges. Call it before tight_layout, which then makes room for its lines; returns `text`."""
    import textwrap
    renderer = fig.canvas.get_renderer()
    full = " ".join(text.get_text().split("\n"))
    width = len(full)
    while width > 16:
        box = text.get_window_extent(renderer)
        if box.x0 >= 0 and box.x1 <= fig.bbox.width and box.width <= 0.96 * fig.bbox.width:
            break
        width = int(width * 0.85)
        text.set_text("\n".join(textwrap.wrap(full, width)))
    return text


def place_labels(ax, labels, offsets=None, avoid=(), **text_kw):
    """Annotates `labels` [(text, (x, y)), ...], most important first, so that no two overlap, none
    covers an artist of `avoid` (a legend) and none leaves the axes: each takes the first of `offsets`
    (points from its point; by default around it at growing distances) where its box is clear of the
    labels placed before it; one with no clear place is left out. Call it once the figure's layout is
    final (after tight_layout). Returns the placed annotations."""
    if offsets is None:
        offsets = [(dx * r, dy * r) for r in (1, 2, 3, 4) for dx, dy in ((4, 6), (4, -12), (-4, 6), (-4, -12))]
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    axes_box = ax.get_window_extent(renderer)
    placed, boxes = [], [a.get_window_extent(renderer) for a in avoid]
    for text, xy in labels:
        for dx, dy in offsets:
            kw = dict(text_kw)
            kw.setdefault("ha", "left" if dx >= 0 else "right")
            a = ax.annotate(text, xy, xytext=(dx, dy), textcoords="offset points", **kw)
            box = a.get_window_extent(renderer).expanded(1.05, 1.1)
            inside = (box.x0 >= axes_box.x0 and box.x1 <= axes_box.x1 and box.y0 >= axes_box.y0
                      and box.y1 <= axes_box.y1)
            if inside and not any(box.overlaps(b) for b in boxes):
                placed.append(a)
                boxes.append(box)
                break
            a.remove()
    return placed
