"""A Profile written out: Chrome-trace / Perfetto JSON (``write_trace``) and a PNG timeline
(``write_png``, matplotlib imported only here, only when called).

Source of the JSON format: the Trace Event Format (Chrome's "JSON Object Format": a
``traceEvents`` list; ``"ph": "X"`` complete events with ``ts``/``dur`` in microseconds, ``pid``,
``tid``, ``args``; ``"ph": "M"`` metadata events ``process_name`` / ``thread_name`` /
``thread_sort_index``), which ui.perfetto.dev opens.
"""
from __future__ import annotations

import json
import os


def _split_track(track: str) -> tuple:
    core, _, eng = track.partition(".")
    c = int(core[4:]) if core.startswith("core") and core[4:].isdigit() else 0
    return c, (eng or track)


def _operand(o) -> str:
    shape = "x".join(str(d) for d in o.shape)
    return f"{o.role}: {o.buffer} {o.alloc} [{shape}] {o.dtype} {o.nbytes} B"


def trace_events(profile) -> list:
    """The ``traceEvents`` of one profile: per core (``pid`` = core id) a ``process_name``; per
    track a ``tid`` (tracks in the profile's engine order, numbered from 1) with ``thread_name``
    and ``thread_sort_index``; one ``X`` event per instruction (``name`` = op, ``cat`` = engine,
    ``ts``/``dur`` in µs, ``args``: location, api, seq, the cost rule, flops, HBM bytes, operands
    and options)."""
    from .profile import _track_order

    tracks = sorted({r.track for r in profile.records}, key=_track_order)
    tid = {t: i + 1 for i, t in enumerate(tracks)}
    out: list = []
    for core in sorted({_split_track(t)[0] for t in tracks}):
        out.append({"name": "process_name", "ph": "M", "pid": core, "tid": 0,
                    "args": {"name": f"{profile.kernel} core{core} ({profile.target})"}})
        out.append({"name": "process_sort_index", "ph": "M", "pid": core, "tid": 0,
                    "args": {"sort_index": core}})
    for t in tracks:
        core, eng = _split_track(t)
        out.append({"name": "thread_name", "ph": "M", "pid": core, "tid": tid[t], "args": {"name": eng}})
        out.append({"name": "thread_sort_index", "ph": "M", "pid": core, "tid": tid[t],
                    "args": {"sort_index": tid[t]}})
    for r, span in zip(profile.records, profile.timeline.spans):
        ev = span.event
        args = {"location": r.location, "api": r.api, "seq": r.seq, "engine": r.engine,
                "cost": r.why, "flops": r.flops, "hbm_bytes": r.hbm_bytes,
                "reads": [_operand(o) for o in ev.reads], "writes": [_operand(o) for o in ev.writes]}
        args.update({f"option.{k}": v for k, v in ev.options.items()})
        out.append({"name": r.op, "cat": r.engine, "ph": "X", "ts": r.start_us, "dur": r.duration_us,
                    "pid": _split_track(r.track)[0], "tid": tid[r.track], "args": args})
    return out


def write_trace(profile, path) -> str:
    """Write ``{"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}`` to ``path``
    (directories created); returns the path as a string. Values JSON cannot hold are written as
    their ``str``."""
    path = os.fspath(path)
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    doc = {"traceEvents": trace_events(profile), "displayTimeUnit": "ns",
           "otherData": {"kernel": profile.kernel, "target": profile.target, "lnc": profile.lnc,
                         "estimated_us": profile.total_us, "hfu": profile.hfu, "mbu": profile.mbu,
                         "warnings": [w.message for w in profile.warnings],
                         "source": "nkisim estimated device time (cost model), not a device measurement"}}
    with open(path, "w") as f:
        json.dump(doc, f, default=str)
    return path


def _matplotlib():
    """matplotlib's Figure, Rectangle and colour map (no pyplot: no backend or global state)."""
    try:
        from matplotlib import colormaps
        from matplotlib.figure import Figure
        from matplotlib.patches import Rectangle
    except ImportError as exc:
        raise ImportError("Profile.plot needs matplotlib: pip install 'nkisim[plot]'") from exc
    return Figure, Rectangle, colormaps["tab20"]


def write_png(profile, path) -> str:
    """Draw one row per track (top: core 0's TensorE), one bar per instruction coloured by op,
    x in µs, and save a PNG at ``path``; returns the path as a string. Raises ImportError naming
    ``nkisim[plot]`` when matplotlib is missing."""
    from .profile import _track_order

    Figure, Rectangle, cmap = _matplotlib()
    path = os.fspath(path)
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    tracks = sorted({r.track for r in profile.records}, key=_track_order)
    ops = sorted({r.op for r in profile.records})
    colour = {op: cmap(i % 20) for i, op in enumerate(ops)}
    fig = Figure(figsize=(12, 0.5 * len(tracks) + 1.5))
    ax = fig.add_subplot()
    for row, t in enumerate(tracks):
        by_op: dict = {}
        for r in profile.records:
            if r.track == t:
                by_op.setdefault(r.op, []).append((r.start_us, max(r.duration_us, 1e-6)))
        for op, bars in by_op.items():
            ax.broken_barh(bars, (row - 0.4, 0.8), facecolors=colour[op])
    ax.set_yticks(range(len(tracks)), tracks)
    ax.invert_yaxis()
    ax.set_xlim(0, max(profile.total_us, 1e-3))
    ax.set_xlabel("estimated device time (us)")
    ax.set_title(f"{profile.kernel} on {profile.target} (LNC{profile.lnc}): {profile.total_us:.3f} us")
    handles = [Rectangle((0, 0), 1, 1, color=colour[op]) for op in ops[:20]]
    if handles:
        ax.legend(handles, ops[:20], loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100)
    return path


__all__ = ["trace_events", "write_trace", "write_png"]
