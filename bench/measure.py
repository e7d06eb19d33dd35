"""Measuring for the benchmarks: interleaved repetitions, samples, rows and the table.

``interleaved`` runs the two sides of a comparison in turns and keeps one value per
repetition for each; a ``Row`` holds both sides' samples and the target; ``table`` prints
rows as a Markdown table, medians first, then min and max.
"""

import os
import platform
import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Sample:
    """Seconds (or bytes) per unit, one value per repetition."""

    wall: list
    cpu: list

    @property
    def median(self) -> float:
        """The median wall-clock value: what the table shows and the targets are judged on."""
        return statistics.median(self.wall)


@dataclass
class Row:
    """One line of the table: plainagent against its floor, and the target if there is one.

    A target is a ratio (``at_most`` times the floor) or a time (``under`` seconds); it is
    judged on the wall-clock medians and, where CPU time was measured, on CPU time too.
    """

    name: str
    ours: Sample
    floor: Sample
    floor_name: str
    at_most: float | None = None
    under: float | None = None
    unit: str = "s"

    @property
    def ratio(self) -> float:
        """plainagent's median over the floor's."""
        return self.ours.median / self.floor.median

    @property
    def cpu_ratio(self) -> float | None:
        """The same ratio for CPU time, or ``None`` where CPU time was not measured."""
        if not self.ours.cpu or not self.floor.cpu or not statistics.median(self.floor.cpu):
            return None
        return statistics.median(self.ours.cpu) / statistics.median(self.floor.cpu)

    def verdict(self) -> str:
        """Say the target and whether it is met: ``<= 1.20x: met``, ``... wall met, CPU MISSED``."""
        if self.at_most is not None:
            target = f"<= {self.at_most:.2f}x"
            met = {"wall": self.ratio <= self.at_most}
            if self.cpu_ratio is not None:
                met["CPU"] = self.cpu_ratio <= self.at_most
        elif self.under is not None:
            target = f"< {amount(self.under, self.unit)}"
            met = {"wall": self.ours.median < self.under}
            if self.ours.cpu:
                met["CPU"] = statistics.median(self.ours.cpu) < self.under
        else:
            return ""
        if len(set(met.values())) == 1:
            return f"{target}: {'met' if met['wall'] else 'MISSED'}"
        return f"{target}: " + ", ".join(f"{clock} {'met' if ok else 'MISSED'}" for clock, ok in met.items())


def children_cpu() -> float:
    """CPU seconds used by the child processes that have ended."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def interleaved(
    repeats: int, functions: dict, cpu_clock: Callable[[], float] = time.process_time, warm_up: bool = True
) -> dict:
    """Run each function ``repeats`` times, taking turns; return a ``Sample`` for each.

    A function does some units of work and returns how many; the sample holds seconds per
    unit. Each runs once untimed first (warm caches, written bytecode) unless ``warm_up`` is
    false; the order rotates every round, so neither side always runs right after the other.
    """
    for function in functions.values() if warm_up else ():
        function()
    samples = {name: Sample([], []) for name in functions}
    names = list(functions)
    for round_number in range(repeats):
        shift = round_number % len(names)
        for name in names[shift:] + names[:shift]:
            wall, cpu = time.perf_counter(), cpu_clock()
            units = functions[name]()
            samples[name].cpu.append((cpu_clock() - cpu) / units)
            samples[name].wall.append((time.perf_counter() - wall) / units)
    return samples


def amount(value: float, unit: str) -> str:
    """Format seconds as us or ms, bytes as MB."""
    if unit == "B":
        return f"{value / 1e6:.1f} MB"
    if abs(value) < 1e-3:
        return f"{value * 1e6:.1f} us"
    return f"{value * 1e3:.2f} ms"


def spread(sample: Sample, unit: str) -> str:
    """Format a sample as ``median [min to max]``."""
    return f"{amount(sample.median, unit)} [{amount(min(sample.wall), unit)} to {amount(max(sample.wall), unit)}]"


def table(rows: list) -> str:
    """Return the rows as a Markdown table."""
    lines = [
        "| row | plainagent: median [min to max] | floor: median [min to max] | ratio | CPU ratio | target |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        cpu = "" if row.cpu_ratio is None else f"{row.cpu_ratio:.2f}x"
        lines.append(
            f"| {row.name} | {spread(row.ours, row.unit)} | {row.floor_name}: {spread(row.floor, row.unit)} "
            f"| {row.ratio:.2f}x | {cpu} | {row.verdict()} |"
        )
    return "\n".join(lines)


def machine() -> str:
    """Say what this ran on: Python, system, CPU model and count, and the load when it started."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            model = next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = f", load {os.getloadavg()[0]:.2f} at start" if hasattr(os, "getloadavg") else ""
    return f"Python {platform.python_version()} on {platform.system()}, {model}, {os.cpu_count()} CPUs{load}"
