"""The results of a run as pages to read: a static HTML site (`--html DIR`) or Markdown
(`--markdown DIR`, what code hosts display; the copy in docs/ is one).

Each section's page holds its lesson (the module's docstring, which is Markdown), its code
with the docstring cut (as in the notebook), the output it printed, its figure and every
check it made, passed or failed; the index lists the sections with their status, seconds
and checks, and the versions the run used. Everything comes from the run's results and the
section files, read without importing them. The HTML has no scripts and loads nothing from
the network: styles are inline, figures are files beside the pages.
"""

from __future__ import annotations

import datetime
import hashlib
import pathlib

import jinja2
import markdown
import pygments
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from presenting.source import lesson_prose, section_code
from sections.registry import file_stem

FIGURES = "figures"  # the pages' figures, in this subdirectory of the site


def source_hash(path: pathlib.Path) -> str:
    """What a rendered page records of the section file it came from."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def page_name(section: dict, suffix: str) -> str:
    return file_stem(section["number"], section["slug"]) + suffix


def pages(report: dict, files: dict[str, pathlib.Path]) -> list[dict]:
    """What each page shows: the section's results, with its lesson, code and source hash."""
    found = []
    for section in report["sections"]:
        path = files[section["slug"]]
        found.append({**section, "lesson": lesson_prose(path), "code": section_code(path),
                      "source": str(path.relative_to(path.parents[1])), "source_sha256": source_hash(path),
                      "figure": f"{FIGURES}/{page_name(section, '.png')}" if section["plots"] else None})
    return found


def copy_figures(report: dict, site: pathlib.Path) -> None:
    (site / FIGURES).mkdir(parents=True, exist_ok=True)
    for section in report["sections"]:
        for drawn in section["plots"]:
            drawn = pathlib.Path(drawn)
            target = site / FIGURES / page_name(section, ".png")
            if drawn.resolve() != target.resolve():
                target.write_bytes(drawn.read_bytes())


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("presenting", "templates"),
                             autoescape=jinja2.select_autoescape(["html.j2"]), keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["markdown"] = lambda text: markdown.markdown(text, extensions=["fenced_code", "tables"])
    env.filters["python"] = lambda code: pygments.highlight(code, PythonLexer(), HtmlFormatter(cssclass="code"))
    return env


def write(report: dict, files: dict[str, pathlib.Path], site: pathlib.Path, kind: str) -> list[pathlib.Path]:
    """Writes the index and one page per section into `site` as "html" or "markdown";
    returns the files written."""
    suffix = {"html": ".html", "markdown": ".md"}[kind]
    env = _environment()
    site.mkdir(parents=True, exist_ok=True)
    copy_figures(report, site)
    context = {"report": report, "pages": pages(report, files), "suffix": suffix, "page_name": page_name,
               "date": datetime.date.today().isoformat(),
               "style": HtmlFormatter(cssclass="code").get_style_defs(".code")}
    written = []
    index = site / f"index{suffix}"
    index.write_text(env.get_template(f"index{suffix}.j2").render(context))
    written.append(index)
    template = env.get_template(f"section{suffix}.j2")
    for page in context["pages"]:
        path = site / page_name(page, suffix)
        path.write_text(template.render(context, page=page))
        written.append(path)
    return written
