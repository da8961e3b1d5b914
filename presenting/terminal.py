"""A run as the terminal shows it: the header, each section's banner and result line, the
summary, and `--list` and `--versions`."""

from __future__ import annotations

import pathlib
import textwrap

from harness.results import Check, SectionResult

RULE = "=" * 78


def print_list(infos) -> None:
    """One line per section: number, slug, whether it trains a model, what it shows."""
    width = max(len(info.slug) for info in infos)
    for info in infos:
        trains = "trains" if info.trains else "-"
        print(f"{info.number:>3}  {info.slug:<{width}}  {trains:<6}  {info.shows}")


def print_versions(described: dict, fixes: list) -> None:
    for name, version in described["versions"].items():
        print(f"{name:<18} {version}")
    print(f"{'devices':<18} {', '.join(described['devices'])}")
    for fix in fixes:
        print(f"compat {fix.line()}")


def print_header(described: dict, fixes: list, workdir: pathlib.Path, removed: bool, jobs: int) -> None:
    print(RULE)
    print("Kauldron tutorial")
    print(" | ".join(f"{name} {version}" for name, version in described["versions"].items()))
    print(f"devices: {', '.join(described['devices'])}")
    for fix in fixes:
        print(f"compat {fix.line()}")
    cache = described["cache"]
    if cache:
        programs = sum(1 for _ in pathlib.Path(cache, "jax").glob("*-cache"))
        print(f"cache: {cache} ({programs} compiled programs; --no-cache to compile afresh)")
    else:
        print("cache: off (everything is compiled afresh)")
    print(f"workdir: {workdir}" + (" (removed at the end; --keep keeps it)" if removed else ""))
    if jobs > 1:
        print(f"jobs: {jobs} worker processes (each section is printed whole, in order, when done)")


def section_banner(info) -> str:
    return f"\n{RULE}\n{info.number}. {info.title}  [{info.slug}]\n{RULE}"


def checks_counted(checks: list[Check]) -> str:
    """'12 checks', or '12 checks, 1 failed'."""
    failed = sum(not check.passed for check in checks)
    text = f"{len(checks)} check" + ("" if len(checks) == 1 else "s")
    return text + (f", {failed} failed" if failed else "")


def print_result(result: SectionResult) -> None:
    timing = f"{result.seconds:.1f} s, {checks_counted(result.checks)}"
    if result.status == "failed":
        print(f"-> FAILED ({timing}): {result.summary}")
        if not result.error.expected:
            print("   last frames:")
            print("   " + result.error.short_traceback.rstrip().replace("\n", "\n   "))
    else:
        print(f"-> {result.status} ({timing}): {result.summary}")
    for path in result.plots:
        print(f"   figure: {path}")


def print_summary(results: list[SectionResult], totals: dict) -> None:
    print(f"\n{RULE}\nSUMMARY\n{RULE}")
    width = max(len(r.slug) for r in results)
    for r in results:
        # Shortened at a word boundary: the JSON has it whole.
        summary = textwrap.shorten(r.summary, width=90, placeholder=" ...")
        print(f"{r.number:>3}  {r.slug:<{width}}  {r.status:<7} {r.seconds:>6.1f} s  {len(r.checks):>3} checks  {summary}")
    print(
        f"{totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped;"
        f" {checks_counted([c for r in results for c in r.checks])} in {totals['seconds']:.1f} s"
    )
