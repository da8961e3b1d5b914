"""The sections: what they are, and how to pick them.

A section is a file `sections/sNN_<slug>.py` whose lesson function is decorated with
`@section(...)` (harness/lesson_format.py says what the file holds). The catalog reads those
decorators without importing anything, so a run imports only the modules of the sections
it selected (`kontext` alone must not pay for TensorFlow, which `kd.train` imports).
"""

from __future__ import annotations

import dataclasses
import inspect

from harness import lesson_format

# The reading path on the index, in order: each part's key (`@section(part=...)`) and what
# its sections teach together.
PARTS = {
    "picture": "The whole picture first: a real dataset, a config file, kauldron.main, test accuracy",
    "glue": "The glue: configs, references and key paths",
    "parts": "Shapes, losses and metrics",
    "training": "Training: the Trainer, sweeps, seeds, evaluation and checkpoints",
    "for-real": "Running it for real: the command line, devices, data, fine-tuning, randomness, "
                "evaluation, export, NNX, several processes",
    "recipes": "Recipes users ask for: gradient accumulation, data mixtures, a metric writer of your own",
}


@dataclasses.dataclass(frozen=True)
class SectionInfo:
    number: int
    slug: str
    title: str
    shows: str  # what the lesson shows, in a line: --list and the README's table
    part: str  # its part of the reading path (a key of PARTS)
    trains: bool  # whether it trains a model (seconds, not milliseconds)
    module: str
    # Whether, with --jobs, it starts before the others: a long lesson that works mostly in
    # processes of its own, which then overlap with the rest.
    start_early: bool = False
    reference: str | None = None  # the page of Kauldron's own docs on the topic
    # Whether its shell blocks start Python processes (read from them: harness/shell.py's
    # starts_python); the run then starts the server that forks them warm (warm_start.py).
    starts_processes: bool = False


class SelectionError(ValueError):
    """A section selector matched nothing, or more than one section."""


def section(number: int, slug: str, title: str, *, shows: str, part: str, trains: bool = False,
            start_early: bool = False, reference: str | None = None):
    """Marks a lesson function. Arguments must be literals: the catalog reads them with ast.
    `shows`: what the lesson shows, in a line; `part`: its part of the reading path (a key
    of PARTS); `trains`: whether it trains a model; `start_early`: whether, with --jobs,
    it starts before the others (a long lesson that works mostly in processes of its own);
    `reference`: the page of Kauldron's own docs on the topic. Whether it starts Python
    processes is read from its shell blocks."""

    return lambda fn: fn


def _info(path, arguments: tuple[list, dict], commands: list[str]) -> SectionInfo:
    bound = inspect.signature(section).bind(*arguments[0], **arguments[1])
    bound.apply_defaults()
    if bound.arguments["part"] not in PARTS:
        raise ValueError(f"{path.name}: part={bound.arguments['part']!r} is not one of {sorted(PARTS)}")
    from harness.shell import starts_python

    return SectionInfo(module=f"sections.{path.stem}",
                       starts_processes=any(map(starts_python, commands)), **bound.arguments)


def catalog(directory=lesson_format.SECTIONS_DIR) -> list[SectionInfo]:
    """Every section, in number order, read from the section files without importing them."""
    infos = [_info(path, call, commands) for path in lesson_format.section_files(directory)
             for call, commands in lesson_format.section_calls(path)]
    infos.sort(key=lambda info: info.number)
    for key in ("number", "slug"):
        values = [getattr(info, key) for info in infos]
        duplicates = {v for v in values if values.count(v) > 1}
        if duplicates:
            raise ValueError(f"duplicate section {key}s: {sorted(duplicates)}")
    return infos


def describe(infos: list[SectionInfo]) -> str:
    return ", ".join(f"{info.number} {info.slug}" for info in infos)


def select(infos: list[SectionInfo], selectors: list[str]) -> list[SectionInfo]:
    """Sections by number, slug or unique slug prefix, in the order asked, without repeats."""
    chosen: list[SectionInfo] = []
    for selector in selectors:
        wanted = selector.strip().lower()
        if not wanted:
            raise SelectionError(f"empty section name; valid sections: {describe(infos)}")
        if wanted.isdigit():
            matches = [i for i in infos if i.number == int(wanted)]
        else:
            matches = [i for i in infos if i.slug == wanted] or [
                i for i in infos if i.slug.startswith(wanted)
            ]
        if not matches:
            raise SelectionError(f"unknown section {selector!r}; valid sections: {describe(infos)}")
        if len(matches) > 1:
            raise SelectionError(
                f"ambiguous section {selector!r} (matches {describe(matches)}); "
                f"valid sections: {describe(infos)}"
            )
        if matches[0] not in chosen:
            chosen.append(matches[0])
    return chosen


def file_stem(number: int, slug: str) -> str:
    """How a section's files are named: its workdir, its figure, its page (`03-kontext`)."""
    return f"{number:02d}-{slug}"


def section_file(info: SectionInfo):
    """The file of a section (`sections/s03_kontext.py`)."""
    return lesson_format.ROOT / (info.module.replace(".", "/") + ".py")
