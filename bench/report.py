"""The benchmark's result: one table of targets (measured, baseline, ratio, goal) printed and written as JSON + markdown
(``bench/results/<date>.json`` / ``.md``)."""

from __future__ import annotations

import json
import os
import platform
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    mem = 0
    try:
        with open("/proc/meminfo") as f:
            mem = int(f.readline().split()[1]) >> 10
    except OSError:
        pass
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    return {"cores": os.cpu_count(), "cpu": cpu, "memory_mb": mem, "python": platform.python_version(),
            "load_1m_at_start": load}


def row(target: str, what: str, measured: str, baseline: str, ratio: float | None, goal: str,
        met: bool | None) -> dict[str, Any]:
    return {"target": target, "what": what, "measured": measured, "baseline": baseline,
            "ratio": None if ratio is None else round(ratio, 2), "goal": goal,
            "met": None if met is None else bool(met)}


def _verdict(met: bool | None) -> str:
    return "–" if met is None else ("met" if met else "NOT met")


def table_lines(rows: list[dict[str, Any]]) -> list[str]:
    head = ("#", "what", "measured", "baseline", "ratio", "goal", "")
    cells = [head] + [(r["target"], r["what"], r["measured"], r["baseline"],
                       "–" if r["ratio"] is None else f"{r['ratio']:.2f}", r["goal"], _verdict(r["met"]))
                      for r in rows]
    widths = [max(len(str(c[i])) for c in cells) for i in range(len(head))]
    return ["  ".join(str(c[i]).ljust(widths[i]) for i in range(len(head))).rstrip() for c in cells]


def markdown(result: dict[str, Any]) -> str:
    out = [f"# Benchmark {result['started']}", "", f"Command: `{result['command']}`", "",
           f"Machine: {result['machine']['cores']} cores ({result['machine']['cpu']}), "
           f"{result['machine']['memory_mb']} MB, load {result['machine']['load_1m_at_start']} at start. "
           "Shared machine: absolute numbers are noise; the ratios (same run, same data) are what count.", "",
           "| # | what | measured | baseline | ratio | goal | |", "|---|---|---|---|---|---|---|"]
    for r in result["targets"]:
        ratio = "–" if r["ratio"] is None else f"{r['ratio']:.2f}"
        out.append(f"| {r['target']} | {r['what']} | {r['measured']} | {r['baseline']} | {ratio} | {r['goal']} | "
                   f"{_verdict(r['met'])} |")
    out += ["", "Details (JSON):", "", "```json", json.dumps(result["details"], indent=1, default=str), "```", ""]
    return "\n".join(out)


def result_paths(out_dir: Path, suffix: str = "", day: str | None = None) -> tuple[Path, Path]:
    """``<date>[-suffix].json`` and ``.md`` in ``out_dir``, or with ``-2``, ``-3``, ... when a run of the same day
    wrote those already (an earlier run's figures may be cited by the README: never overwritten)."""
    stem = (day or datetime.now(timezone.utc).strftime("%Y-%m-%d")) + (f"-{suffix}" if suffix else "")
    for n in range(1, 1000):
        name = stem if n == 1 else f"{stem}-{n}"
        js, md = out_dir / f"{name}.json", out_dir / f"{name}.md"
        if not js.exists() and not md.exists():
            return js, md
    raise FileExistsError(f"{out_dir}: 999 result files named {stem}; pass another --out")


def write(result: dict[str, Any], out_dir: Path, suffix: str = "") -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    js, md = result_paths(out_dir, suffix)
    js.write_text(json.dumps(result, indent=1, default=str) + "\n")
    md.write_text(markdown(result))
    return js, md
