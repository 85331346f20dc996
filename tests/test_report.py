"""What zoo-run prints: the models' and errors' text reaches the terminal as it is, never
read as rich markup."""

from __future__ import annotations

import io

from rich.console import Console

from runner.cli.run import _console
from runner.matrix.results import CellResult
from runner.report import (
    InFlight,
    cell_line,
    crowd_line,
    host_line,
    make_progress,
    summary_table,
)
from tests.results import make_result

MARKUP = "chat template must end with [/INST] [bold]x[/bold] [red]"


def result(**values) -> CellResult:
    base = dict(
        model_id="custom/m:[word]",
        backend="eager",
        mode="none",
        error_signature=f"ValueError: {MARKUP}",
    )
    return make_result("k", values.pop("status", "eager_error"), **{**base, **values})


def printed(renderable, console: Console | None = None) -> str:
    console = console or Console(file=io.StringIO(), width=300, color_system=None)
    console.print(renderable)
    return console.file.getvalue()


def test_a_cell_line_prints_brackets_as_text_on_any_console():
    # A console with markup on (rich's default): the line must not depend on it.
    line = printed(cell_line(result(), 3, 7))
    assert line.strip() == (
        f"[3/7] custom/m:[word] eager dyn=false fp32 eager_error (ValueError: {MARKUP})"
    )


def test_a_cell_line_keeps_its_numbers_and_styles_its_status():
    line = cell_line(result(status="pass", error_signature=None, speedup=1.5, compile_s=2.0), 1, 1)
    assert line.plain == "[1/1] custom/m:[word] eager dyn=false fp32 pass 1.50x compile 2.0s"
    assert [span.style for span in line.spans] == ["green"]


def test_a_crowded_compile_is_said_on_its_line_and_in_the_summary():
    crowded = result(status="pass", error_signature=None, compile_s=640.0, compile_beside=12.4)
    line = cell_line(crowded, 1, 3).plain
    assert line.endswith("compile 640.0s beside 12.4 others")
    # Below one other cell, or never seen compiling: nothing is said.
    quiet = [
        result(status="pass", error_signature=None, compile_s=30.0, compile_beside=0.6),
        result(status="pass", error_signature=None, compile_s=30.0, compile_beside=None),
    ]
    assert "beside" not in cell_line(quiet[0], 2, 3).plain
    assert crowd_line(quiet) is None
    assert crowd_line([crowded, *quiet]) == (
        "compile times are a crowded host's: 1 of 2 cell(s) compiled beside one other "
        "cell or more (over all 2, a median of 6.5 others beside a compile); alone, a "
        "compile takes less (--workers 1)"
    )


def test_the_summary_says_how_fast_the_host_launched_while_cells_were_timed():
    def timed(name: str, canary: float | None, beside: float | None):
        return result(
            status="pass",
            error_signature=None,
            model_id=name,
            host_launch_us=canary,
            timing_beside=beside,
        )

    cells = [timed("timm/a", 5.0, 0.0), timed("timm/[b]", 9.5, 4.0), timed("timm/c", 6.0, 2.0)]
    assert host_line(cells) == (
        "host while timed: the launch canary read 6.0 µs per call at the median of 3 "
        "cells (5.0 fastest, 9.5 slowest, timm/[b]); a median of 2.0 other cells busy "
        "beside a timing"
    )
    # One reading has no spread; cells never timed (failures) are left out.
    assert host_line([cells[0], timed("timm/d", None, None)]) is None


def test_the_progress_line_names_a_cell_still_running():
    running = InFlight()
    assert running.line() == "waiting for a worker"
    running.phase("a", "timm/a · compiling")
    running.phase("b", "timm/b · compiling")
    running.phase("a", "timm/a · timing")
    assert running.line() == "timm/a · timing (+1 running)"
    assert running.finish("a") and not running.finish("a")
    assert running.line() == "timm/b · compiling"
    running.finish("b")
    assert running.line() == "waiting for a worker"


def test_progress_descriptions_and_the_summary_are_text():
    console = Console(file=io.StringIO(), width=300, color_system=None, force_terminal=True)
    with make_progress(console) as progress:
        progress.add_task(f"custom/m:[word] · {MARKUP}", total=1)
    assert f"custom/m:[word] · {MARKUP}" in console.file.getvalue()
    table = printed(summary_table([result(), result(status="crash", model_id="[x]")]))
    assert "1 eager_error, 1 crash" in table


def test_the_summary_lists_its_configs_in_the_plans_order():
    """A named set's columns read as the run ran them (the headline first), not sorted
    by name; a config the order does not name comes after, sorted."""
    from runner.matrix.cells import CellConfig
    from runner.report import summary_key

    inductor = CellConfig("inductor", "default", "false", "bf16", "infer")
    aot_eager = CellConfig("aot_eager", "none", "false", "bf16", "infer")
    results = [
        make_result(config.backend, backend=config.backend, mode=config.mode,
                    dynamic="false", precision="bf16", step="infer", device="cuda")
        for config in (aot_eager, inductor)
    ] + [make_result("c", backend="cudagraphs", mode="none", dynamic="false",
                     precision="bf16", step="infer", device="cuda")]  # fmt: skip

    def firsts(table: str) -> list[str]:
        return [
            line.split("│")[1].split()[0] for line in table.splitlines() if line.startswith("│")
        ]

    ordered = summary_table(results, [summary_key("cuda", c) for c in (inductor, aot_eager)])
    assert firsts(printed(ordered)) == ["inductor/default", "aot_eager", "cudagraphs"]
    assert firsts(printed(summary_table(results))) == [
        "aot_eager", "cudagraphs", "inductor/default",
    ]  # fmt: skip


def test_zoo_runs_consoles_print_paths_and_messages_as_they_are(capsys):
    for stderr in (False, True):
        _console(stderr).print(f"skipping cells in /data/[run]/zoo.duckdb: {MARKUP}")
    captured = capsys.readouterr()
    for stream in (captured.out, captured.err):
        assert f"/data/[run]/zoo.duckdb: {MARKUP}" in stream
