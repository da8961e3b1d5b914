"""The results of a run as pages to read: Markdown (`--markdown DIR`, what code hosts
display; the copy in docs/ is one) or a static HTML site (`--html DIR`).

A section's page is its program (harness/lesson_format.py), as a reader takes it home: a first
cell that makes the workdir, the setup, then for each step its prose, the experiment's
files it first uses (folded), its code and shell blocks each followed by what it printed
in this run, its figure, and its checks folded into one line. The code outside the folds,
run in order in a fresh kernel at the repository root, prints what the page shows
(tests/test_sections.py, by tests/page_programs.py). The index says what Kauldron and this tutorial are, then
lists the sections. Both are written once, as Markdown (templates/*.md.j2); the HTML pages
are that Markdown converted, with no scripts and nothing loaded from the network (styles
inline, figures beside the pages).
"""

from __future__ import annotations

import datetime
import hashlib
import os
import pathlib
import re
import site
import sysconfig
import tempfile
import textwrap

import jinja2
import markdown
from pygments.formatters import HtmlFormatter

from harness import lesson_format
from harness.registry import PARTS, SectionInfo, file_stem, section_file

ROOT = lesson_format.ROOT
FIGURES = "figures"  # the pages' figures, in this subdirectory of the site
FOLD_OVER = 25  # an output longer than this many lines is folded away


# What Kauldron's docs describe and the PyPI package does not do on these pins: (what, how
# it fails, the section that checks it, the start of that check's claim, what to use instead).
# Each is a check that fails the day the feature starts working.
PYPI_GAPS = [
    ("`kd.ckpts.PartialKauldronLoader`, loading with renaming",
     "`ModuleNotFoundError`: orbax's `model_surgery.standard_checkpoint_handler` is not published",
     "finetune", "kd.ckpts.PartialKauldronLoader from PyPI", "a small `kd.ckpts.InitTransform` of your own"),
    ("the `kauldron` command", "`TypeError: 'module' object is not callable`",
     "cli", "the `kauldron` console script calls a module", "`kd.cli.data.ElementSpec(cfg=cfg)()` and the like"),
    ("`python -m kauldron.cli.main`", "`AttributeError: 'list' object has no attribute 'patch'`",
     "cli", "kauldron.cli.main's main with the argv list", "`kauldron.cli.run.EvalShape(cfg=cfg)()` and the like"),
    ("`kd.train.Trainer.eval_only()`", "`AttributeError`: its placeholder `train_ds` is a `kd.data.tf` dataset",
     "evals", "kd.train.Trainer.eval_only() fails on its train_ds's kd.data.tf",
     "`python -m kauldron.main --eval_names=...` with a standalone evaluator"),
    ("`kd.data.tf` pipelines", "`ModuleNotFoundError: No module named 'grain.tensorflow'`",
     "checkpoint", "kd.data.tf does not import from PyPI", "`kd.data.py` (PyGrain) pipelines"),
    ("`kauldron.kxm`, the XManager launcher", "`ImportError: cannot import name 'g3_utils' from 'etils'`",
     "sweep", "kauldron.kxm does not import from the PyPI package", "a sweep as a loop; one `kauldron.main` per run"),
    ("a JSON object holding `true`/`false`/`null` as the `--cfg` value of a field that holds a config"
     " (an optimizer), as Kauldron's launcher writes one", "`TypeError`: the value stays a string",
     "cli", "the launcher's JSON of optax.adamw(0.001, nesterov=True)", "`py::` calls, or Python literals"),
    ("an eval job whose evaluators all set `discard_opt=True`",
     "`ModuleNotFoundError`: it restores through `kd.ckpts.PartialKauldronLoader` (orbax's unpublished `model_surgery`)",
     "evals", "an eval job whose evaluators all set discard_opt=True fails from PyPI",
     "leave `discard_opt` False in at least one evaluator of the job"),
    ("`kauldron.contrib.data.RandomMapTransform`", "`ModuleNotFoundError: No module named 'grain.tensorflow'`:"
     " it is TF-Grain's, for `kd.data.tf`", "mixture", "kauldron.contrib.data.RandomMapTransform from PyPI",
     "`kd.data.py.ElementWiseRandomTransform` (a `grain.RandomMapTransform`)"),
]


def reading_path(infos: list[SectionInfo]) -> list[tuple[str, list[int]]]:
    """The index's reading path: each part (PARTS, in order) with its sections' numbers."""
    return [(title, numbers) for key, title in PARTS.items()
            if (numbers := [info.number for info in infos if info.part == key])]


def pypi_gaps(report: dict) -> list[dict]:
    """The table's rows, each with what this run found: "still fails" when its check
    passed, "works now?" when it failed, "not run" when its section did not run."""
    rows = []
    for what, failure, slug, claim, instead in PYPI_GAPS:
        section = next((s for s in report["sections"] if s["slug"] == slug), None)
        checks = [c for c in section["checks"] if c["claim"].startswith(claim)] if section else []
        status = ("not run" if not checks else "still fails (checked)" if all(c["passed"] for c in checks)
                  else "**works now?** (its check failed)")
        rows.append({"what": what, "failure": failure, "section": section, "instead": instead, "status": status})
    return rows


def source_hash(path: pathlib.Path) -> str:
    """What a rendered page records of the section file it came from."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def page_name(section: dict, suffix: str) -> str:
    return file_stem(section["number"], section["slug"]) + suffix


def machine_paths(workdir: str, stem: str) -> list[tuple[str, str]]:
    """(path, as a page shows it), most specific first: the lesson's workdir is WORKDIR,
    the run's RUN, then `shared_paths()`: the reader's machine is not the one that ran it."""
    return [(f"{workdir}/{stem}", "WORKDIR"), (workdir, "RUN"), *shared_paths()]


def shared_paths() -> list[tuple[str, str]]:
    """Paths any program here prints the same way: the repository is `.`, an installed
    package's directory <site-packages>, the temporary directory <tmp>, the home ~."""
    installed = {*site.getsitepackages(), site.getusersitepackages(), sysconfig.get_paths()["purelib"]}
    paths = [(path, "<site-packages>") for path in installed]
    paths += [(str(ROOT), "."), (os.path.realpath(tempfile.gettempdir()), "<tmp>"), (tempfile.gettempdir(), "<tmp>"),
              (str(pathlib.Path.home()), "~")]
    # Longest first: a virtual environment inside the repository is <site-packages>, not ./.venv/...
    return sorted(paths, key=lambda pair: len(pair[0]), reverse=True)


def without_machine_paths(text: str, workdir: str, stem: str) -> str:
    for path, shown in machine_paths(workdir, stem):
        if path and path != "/":
            text = text.replace(path, shown)
    return text


# What Kauldron shows in a notebook beyond the page, and the code of a page after which its
# note names it: two lines it prints only there (`epy.is_notebook()`; the PyGrain one in a
# test too) and tqdm bars (elsewhere on stderr; there a widget). Training prints one
# (kauldron/utils/status_utils.py's `log`) and draws a bar (utils/utils.py's `enum_iter`), an
# evaluation draws a bar, iterating a PyGrain pipeline (kauldron/data/py/base.py's
# `_get_num_workers`): a step that trains or iterates, and builds a pipeline with kd.data.py
# (or its stand-in), or a page that imports a config whose data is one. tests/test_sections.py
# fails a page whose kernel printed a line its note does not name, or named one it did not print.
TRAINS = re.compile(r"\.train\(")
EVALUATES = re.compile(r"\.evaluate\(")
ITERATES = re.compile(r"\.train\(|\biter\(")
PYGRAIN = re.compile(r"\bdata\.py\.\w")
PYGRAIN_CONFIG = re.compile(r"from configs import (?:\w+, )*(?:digits|mixture|preemptible)\b")


def program_note(source: lesson_format.Program, figure: bool) -> str:
    """The note at the top of a page: it is a program, and what a reader's run of it prints
    beyond the page: a command's full output (where a shell block shows an excerpt),
    Kauldron's notebook-only lines and progress bars (where its code trains, evaluates or
    iterates a PyGrain pipeline), a figure."""
    blocks = [block for step in source.steps for block in step.blocks if block.shown]
    steps = ["\n".join(block.code for block in step.blocks if block.shown and block.kind == "python")
             for step in source.steps]
    code = "\n".join([source.setup, *steps])
    shell = [block for block in blocks if block.kind == "shell"]
    excerpts = [block for block in shell if block.options.get("shows")]
    note = ["This page is a program: its code, run in order in a fresh Python kernel at the root of the repository"
            + (" (a shell block of one command as a `!` line, of several as a `%%bash` cell)" if shell else "")
            + ", prints what the page shows. Only the workdir's path and the last digits of floats differ."]
    if excerpts:
        note.append("A shell block's output here is an excerpt: its command prints more"
                    + (", such as TensorFlow's start-up lines, log lines with absl's prefix (`I1206 12:00:00.123"
                       " ...`) and, in a notebook, tqdm progress bars." if any("-m kauldron.main" in block.code
                                                                             for block in excerpts) else "."))
    pygrain = any(ITERATES.search(step) and (PYGRAIN.search(step) or PYGRAIN_CONFIG.search(source.setup))
                  for step in steps)
    kauldron = [("prints `Starting training loop at step N` when it trains", TRAINS.search(code)),
                ("draws tqdm progress bars when it trains or evaluates", TRAINS.search(code) or EVALUATES.search(code)),
                ("prints `Disabling pygrain multi-processing` when it iterates a PyGrain pipeline", pygrain)]
    said = [what for what, does in kauldron if does]
    if said:
        listed = said[0] if len(said) == 1 else ", ".join(said[:-1]) + ", and " + said[-1]
        note.append(f"In a notebook, Kauldron also {listed}.")
    if figure:
        note.append("The figure shows under its cell.")
    return textwrap.fill(" ".join(note), width=88, break_on_hyphens=False)


def page(section: dict, info: SectionInfo, report: dict) -> dict:
    """What a section's page shows: its program, step by step, with what each block
    printed and each step checked in this run."""
    path = section_file(info)
    source = lesson_format.read(path)
    stem = file_stem(section["number"], section["slug"])
    ran = section.get("steps", [])

    def shown(text: str) -> str:
        return without_machine_paths(text, report["workdir"], stem)

    steps = []
    for index, step in enumerate(source.steps):
        printed = {block["line"]: block for block in ran[index]["blocks"]} if index < len(ran) else {}
        checks = [{**c, "claim": shown(c["claim"])} for c in section["checks"] if c.get("step") == index]
        steps.append({
            "prose": step.prose, "reached": index < len(ran), "further": step.further, "heading": step.heading,
            "files": [(file.path, file.text) for file in step.files],
            "blocks": [{"kind": block.kind, "code": block.code,
                        "printed": shown(printed.get(block.line, {}).get("printed", "")).strip("\n")}
                       for block in step.blocks if block.shown],
            "checks": checks, "checks_failed": sum(not c["passed"] for c in checks),
            "checks_code": step.checks_code,
            "skipped_checks": [c for c in section.get("skipped_checks", []) if c.get("step") == index],
            "figure": f"{FIGURES}/{stem}.png" if section["plots"] and section.get("figure_step") == index else None,
        })
    return {**section, "steps_reached": len(ran), "intro": source.intro, "setup": source.setup,
            "note": program_note(source, figure=any(step["figure"] for step in steps)),
            "workdir_cell": source.workdir_cell(stem), "steps": steps, "helpers": source.helpers,
            "setup_files": [(file.path, file.text) for file in source.setup_files],
            "reference": info.reference, "shows": info.shows,
            "source": source.source, "source_sha256": source_hash(path)}


def copy_figures(report: dict, site: pathlib.Path) -> None:
    (site / FIGURES).mkdir(parents=True, exist_ok=True)
    for section in report["sections"]:
        for drawn in section["plots"]:
            drawn = pathlib.Path(drawn)
            target = site / FIGURES / page_name(section, ".png")
            if drawn.resolve() != target.resolve():
                target.write_bytes(drawn.read_bytes())


def block(text: str, language: str, summary: str) -> str:
    """A fenced block, folded under `summary` when it is longer than FOLD_OVER lines."""
    if text.count("\n") + 1 <= FOLD_OVER:
        return f"```{language}\n{text}\n```"
    return folded(text, language, summary)


def folded(text: str, language: str, summary: str) -> str:
    """A fenced block, always folded under `summary`."""
    return f'<details markdown="1">\n<summary>{summary}</summary>\n\n```{language}\n{text}\n```\n\n</details>'


def inline_code(text: str) -> str:
    """Markdown's `code` as HTML, for where Markdown is not read (a fold's summary)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", text)


def reference_name(url: str) -> str:
    """How the index names a page of Kauldron's docs: `eval: training`, `GitHub: main.py`."""
    if "github.com" in url:
        return "GitHub: " + url.split("/main/", 1)[1].removesuffix("/README.md")
    page, _, anchor = url.rsplit("/", 1)[1].partition("#")
    return page.removesuffix(".html") + (f": {anchor.replace('-', ' ')}" if anchor else "")


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("presenting", "templates"), autoescape=False,
                             keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
    env.filters["block"] = block
    env.filters["folded"] = folded
    env.filters["reference_name"] = reference_name
    env.filters["inline_code"] = inline_code
    return env


def to_html(body: str) -> str:
    return markdown.markdown(body, extensions=["fenced_code", "tables", "md_in_html", "codehilite"],
                             extension_configs={"codehilite": {"guess_lang": False}})


def write(report: dict, infos: list[SectionInfo], site: pathlib.Path, kind: str,
          run_command: str) -> list[pathlib.Path]:
    """Writes the index and one page per section into `site` as "markdown" or "html";
    returns the files written. `run_command`: the README's command that sets up and runs
    the tutorial, which the index shows."""
    suffix = {"html": ".html", "markdown": ".md"}[kind]
    env = _environment()
    site.mkdir(parents=True, exist_ok=True)
    copy_figures(report, site)
    by_slug = {info.slug: info for info in infos}
    pages = [page(section, by_slug[section["slug"]], report) for section in report["sections"]]
    context = {"report": report, "pages": pages, "suffix": suffix, "page_name": page_name,
               "reading_path": reading_path(infos), "run_command": run_command, "pypi_gaps": pypi_gaps(report),
               "date": datetime.date.today().isoformat()}
    html = env.get_template("page.html.j2")
    style = HtmlFormatter(cssclass="codehilite").get_style_defs(".codehilite")

    def write_page(path: pathlib.Path, template: str, title: str, **extra) -> None:
        body = env.get_template(template).render(context, **extra)
        if kind == "html":
            body = html.render(title=title, body=to_html(body.split("-->", 1)[1] if body.startswith("<!--") else body),
                               style=style, comment=body.split("-->", 1)[0] + "-->" if body.startswith("<!--") else "")
        path.write_text(body)

    written = [site / f"index{suffix}"]
    write_page(written[0], "index.md.j2", "Kauldron, section by section")
    for number, shown in enumerate(pages):
        path = site / page_name(shown, suffix)
        write_page(path, "section.md.j2", f"{shown['number']}. {shown['title']}", page=shown,
                   previous=pages[number - 1] if number else None,
                   next=pages[number + 1] if number + 1 < len(pages) else None)
        written.append(path)
    return written
