"""Build the course site offline from the committed notebooks (a development tool outside the package).

    .venv/bin/python tools/course_site.py                 build into build/site/html (what `python3 dev.py site` runs)
    .venv/bin/python tools/course_site.py --out DIR       build elsewhere

What it does, in order, and what makes it fail (exit 1, every problem listed):

1. Stage the pages into build/site/src: the home page (README.md), every lab (notebooks/NN-*.ipynb, outputs as
   committed, never executed), the labs' index and progress notebook, the interview questions, the glossary and
   the cheat-sheet (docs/), the instructors' guide, the design notes, the contributing guide and the benchmarks'
   README; and every other repository file a page links to (a source file, a fixture), as a download. A link to
   a file that does not exist fails the build.
2. Give every figure its alt text from docs/site/alt-text.json (notebook -> cell id -> one text per figure in the
   cell: a code cell's image outputs, a Markdown cell's Mermaid diagrams). A figure without one fails the build;
   so does a text whose figure is gone. Diagrams become `<pre class="mermaid">` with the text as `aria-label`,
   drawn in the browser by the `mermaid` npm package's script, copied into the site (installed once into
   build/site/node with `npm install`, from the registry; nothing is fetched when the site is opened).
3. Run Sphinx (MyST-NB, the Book theme; settings in docs/site/conf.py) with every warning an error: a broken
   cross-reference, a link to a section that does not exist, a page left out of the table of contents.
4. Put each page's committed file behind its download button (`_sources/<page>`: the lab as in the repository,
   not the staged copy whose links were rewritten for the site; the home page's is README.md).
5. Check the HTML it wrote: every page there, every `<img>` with a non-empty `alt`, every diagram labelled, every
   link inside the site pointing to a file (never a bare folder) and an anchor that exist, and every page's
   download button offering that page's own source.
"""

from __future__ import annotations

import argparse
import html.parser
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "docs" / "site"
ALT_TEXT = CONF / "alt-text.json"
BUILD = ROOT / "build" / "site"
MERMAID = "11.17.2"
"""The mermaid package that draws the diagrams (JupyterLab 4 draws the labs' Mermaid with the same major version)."""

GUIDES = ["INSTRUCTORS.md", "DESIGN.md", "CONTRIBUTING.md", "benchmarks/README.md"]
REFERENCE = ["docs/cheatsheet.md", "docs/glossary.md", "notebooks/interview-questions.md", "notebooks/index.ipynb"]
FENCE = re.compile(r"^```mermaid[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
LINK = re.compile(r"\]\(<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\)")


class SiteError(Exception):
    """What is wrong with the site's sources or its output (every problem, one per line)."""


def labs() -> list[str]:
    return [f"notebooks/{p.name}" for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))]


def pages() -> list[str]:
    """Every page of the site, as a path relative to the repository (the home page first)."""
    return ["README.md", "notebooks/README.md", *labs(), *REFERENCE, *GUIDES]


def _source(cell: dict[str, Any]) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def _markdown_of(page: str) -> str:
    path = ROOT / page
    if page.endswith(".ipynb"):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        return "\n\n".join(_source(c) for c in cells if c["cell_type"] == "markdown")
    return path.read_text(encoding="utf-8")


# -- figures and their alt text -----------------------------------------------------------------------------


def figures(nb: dict[str, Any]) -> dict[str, int]:
    """Cell id -> how many figures it holds: image outputs of a code cell, Mermaid diagrams of a Markdown cell."""
    out: dict[str, int] = {}
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            n = sum(
                1
                for o in cell.get("outputs", [])
                if "image/png" in o.get("data", {})
                or "image/svg+xml" in o.get("data", {})
                or "image/jpeg" in o.get("data", {})
            )
        elif cell["cell_type"] == "markdown":
            n = len(FENCE.findall(_source(cell)))
        else:
            n = 0
        if n:
            out[cell.get("id") or "?"] = n
    return out


def alt_problems(alt: dict[str, dict[str, list[str]]], notebooks: list[str]) -> list[str]:
    """Every figure without an alt text, and every alt text whose figure is gone."""
    problems = []
    for page in notebooks:
        name = Path(page).name
        have = figures(json.loads((ROOT / page).read_text(encoding="utf-8")))
        texts = alt.get(name, {})
        for cell, n in have.items():
            given = [t for t in texts.get(cell, []) if isinstance(t, str) and t.strip()]
            if len(given) != n:
                problems.append(
                    f"{page}: cell {cell} has {n} figure(s) and {len(given)} alt text(s) in "
                    f"{ALT_TEXT.relative_to(ROOT)}"
                )
        for cell in sorted(set(texts) - set(have)):
            problems.append(
                f"{page}: {ALT_TEXT.relative_to(ROOT)} gives alt text for cell {cell}, which has no figure (any more)"
            )
    for name in sorted(set(alt) - {Path(p).name for p in notebooks}):
        problems.append(f"{ALT_TEXT.relative_to(ROOT)}: no notebook {name} on the site")
    return problems


def _diagram(source: str, alt: str) -> str:
    body = html_escape(source.rstrip("\n"))
    return (
        f'```{{raw}} html\n<figure class="diagram"><pre class="mermaid" role="img" '
        f'aria-label="{html_escape(alt)}">\n{body}\n</pre></figure>\n```'
    )


def html_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def staged_notebook(nb: dict[str, Any], alt: dict[str, list[str]]) -> dict[str, Any]:
    """The notebook as the site shows it: each image output with its alt text (MyST-NB's cell metadata), each
    Mermaid fence a labelled diagram."""
    for cell in nb["cells"]:
        texts = list(alt.get(cell.get("id") or "?", []))
        if not texts:
            continue
        if cell["cell_type"] == "code":
            cell.setdefault("metadata", {}).setdefault("mystnb", {})["image"] = {"alt": texts[0]}
            if len(texts) > 1:  # several figures in one cell: MyST-NB takes one text per cell, so join them
                cell["metadata"]["mystnb"]["image"] = {"alt": " / ".join(texts)}
        else:
            labels = iter(texts)
            cell["source"] = FENCE.sub(lambda m, labels=labels: _diagram(m.group(1), next(labels)), _source(cell))
    return nb


# -- anchors -----------------------------------------------------------------------------------------------------

HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)


def _heading_text(markdown: str) -> str:
    """A heading's text as a reader sees it: no code ticks, emphasis marks or link targets."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    return re.sub(r"[`*]", "", text).strip()


def jupyterlab_anchor(text: str) -> str:
    """A heading's anchor as JupyterLab makes it: its text, spaces as hyphens (the labs link that way)."""
    return text.replace(" ", "-")


def github_anchor(text: str) -> str:
    """A heading's anchor as GitHub and the site (MyST's default) make it."""
    from myst_parser.slugs import github_slugify

    return github_slugify(text)


def anchors_of(page: str) -> dict[str, str]:
    """A page's JupyterLab-style anchors -> the site's."""
    body = re.sub(r"^```.*?^```", "", _markdown_of(page), flags=re.S | re.M)  # no "# comment" in code
    return {jupyterlab_anchor(t): github_anchor(t) for t in map(_heading_text, HEADING.findall(body))}


def site_links(markdown: str, page: str) -> str:
    """`markdown` of `page` with each link to a section written JupyterLab's way rewritten to the site's anchor."""

    def fix(m: re.Match[str]) -> str:
        link = m.group(1)
        path, _, fragment = link.partition("#")
        target = (Path(page).parent / path).as_posix() if path else page
        target = str(Path(target)).replace("\\", "/")
        if not fragment or not target.endswith((".ipynb", ".md")) or not (ROOT / target).is_file():
            return m.group(0)
        anchors = anchors_of(str((ROOT / target).resolve().relative_to(ROOT)))
        if fragment in anchors.values() or fragment not in anchors:
            return m.group(0)  # already the site's, or broken: Sphinx says so
        return m.group(0).replace(link, f"{path}#{anchors[fragment]}")

    return LINK.sub(fix, markdown)


# -- staging ---------------------------------------------------------------------------------------------------


def _targets(page: str) -> list[tuple[str, str]]:
    """(link as written, repository path it points to) for each relative link of a page."""
    out = []
    for link in LINK.findall(_markdown_of(page)):
        parts = urlsplit(link)
        if parts.scheme or parts.netloc or not parts.path:
            continue
        target = (ROOT / page).parent / unquote(parts.path)
        out.append(
            (
                link,
                target.resolve().relative_to(ROOT).as_posix() if target.resolve().is_relative_to(ROOT) else str(target),
            )
        )
    return out


def downloads() -> tuple[list[str], list[str]]:
    """The repository files the pages link to that are not pages (copied as downloads), and the problems: links
    to files that do not exist, and to a Markdown file or notebook the site leaves out."""
    on_site, found, problems = set(pages()), set(), []
    for page in pages():
        for link, target in _targets(page):
            if not (ROOT / target).exists():
                problems.append(f"{page}: link {link!r} points to {target}, which does not exist")
            elif target not in on_site and (ROOT / target).is_file():
                found.add(target)
    for target in sorted(found):
        if target.endswith((".md", ".ipynb")):
            problems.append(
                f"a page links to {target}, which is not a page of the site: add it to tools/course_site.py"
            )
    return sorted(t for t in found if not t.endswith((".md", ".ipynb"))), problems


def source_problems() -> list[str]:
    """What is wrong before building: figures without alt text (or texts without a figure), links to nowhere."""
    alt = json.loads(ALT_TEXT.read_text(encoding="utf-8"))
    return alt_problems(alt, [p for p in pages() if p.endswith(".ipynb")]) + downloads()[1]


def stage(src: Path) -> list[str]:
    """Lay out the site's sources in `src`; the problems found on the way (links to nowhere, alt texts)."""
    problems = source_problems()
    if problems:
        return problems
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    alt = json.loads(ALT_TEXT.read_text(encoding="utf-8"))
    for page in pages():
        dest = src / page
        dest.parent.mkdir(parents=True, exist_ok=True)
        if page.endswith(".ipynb"):
            nb = staged_notebook(json.loads((ROOT / page).read_text(encoding="utf-8")), alt.get(Path(page).name, {}))
            for cell in nb["cells"]:
                if cell["cell_type"] == "markdown":
                    cell["source"] = site_links(_source(cell), page)
            dest.write_text(json.dumps(nb, indent=1, ensure_ascii=False), encoding="utf-8")
        else:
            dest.write_text(site_links((ROOT / page).read_text(encoding="utf-8"), page), encoding="utf-8")
    for target in downloads()[0]:
        (src / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / target, src / target)
    (src / "index.md").write_text(_index(), encoding="utf-8")
    static = BUILD / "static"  # docs/site/conf.py serves it beside docs/site/_static
    static.mkdir(parents=True, exist_ok=True)
    shutil.copy2(mermaid_script(), static / "mermaid.min.js")
    return problems


def _toctree(caption: str, entries: list[str]) -> str:
    lines = "\n".join(e.rsplit(".", 1)[0] for e in entries)
    return f"```{{toctree}}\n:caption: {caption}\n:maxdepth: 1\n:hidden:\n\n{lines}\n```\n"


def _index() -> str:
    """The home page: the repository's README, and the table of contents of the whole site."""
    return "\n".join(
        [
            "```{include} README.md\n```\n",
            _toctree("The labs", ["notebooks/README.md", *labs()]),
            _toctree("Reference", REFERENCE),
            _toctree("Teaching and contributing", GUIDES),
        ]
    )


def mermaid_script() -> Path:
    """The mermaid package's browser script, installed once from the npm registry into build/site/node."""
    node = BUILD / "node"
    script = node / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
    installed = node / "node_modules" / "mermaid" / "package.json"
    if not (script.exists() and json.loads(installed.read_text())["version"] == MERMAID):
        npm = shutil.which("npm")
        if npm is None:
            raise SiteError(
                "the site's diagrams need the mermaid package from npm, and there is no npm: install "
                "Node.js (20 or later)"
            )
        node.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(node), f"mermaid@{MERMAID}"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return script


# -- checking the output ------------------------------------------------------------------------------------------


class _Page(html.parser.HTMLParser):
    """The ids, links, images and diagrams of one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.images: list[dict[str, str | None]] = []
        self.diagrams: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"] or "")
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"] or "")
        if tag in ("a", "link") and a.get("href"):
            self.links.append(a["href"] or "")
        if tag == "img":
            self.images.append(a)
        if tag == "pre" and "mermaid" in (a.get("class") or "").split():
            self.diagrams.append(a)


SOURCES = "_sources"
"""Where Sphinx copies each page's source, and the theme's download button points (docs/site/conf.py)."""


def page_html(page: str) -> str:
    """The HTML file a page becomes, relative to the site (the home page, README.md, is index.html)."""
    return "index.html" if page == "README.md" else page.rsplit(".", 1)[0] + ".html"


def committed_downloads(out: Path) -> None:
    """Put each page's committed file where its download button points, over the staged copy Sphinx made."""
    for page in pages():
        staged = "index.md" if page == "README.md" else page
        dest = out / SOURCES / staged
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / page, dest)


def download_problems(out: Path) -> list[str]:
    """Pages whose download button does not offer their own committed source."""
    problems = []
    for page in pages():
        path = out / page_html(page)
        if not path.is_file():
            continue
        found = re.search(r'<a href="([^"]*)"[^>]*btn-download-source-button', path.read_text(encoding="utf-8"))
        if found is None:
            problems.append(f"{page_html(page)}: no download button for the page's source")
            continue
        target = (path.parent / unquote(found.group(1))).resolve()
        if not target.is_file() or target.read_bytes() != (ROOT / page).read_bytes():
            problems.append(f"{page_html(page)}: the download button ({found.group(1)}) does not offer {page}")
    return problems


def check_output(out: Path) -> list[str]:
    """What is wrong with the built site: missing pages, images without alt text, unlabelled diagrams, links to
    files or anchors that do not exist, or to a folder."""
    problems = [
        f"missing page: {page} (expected {page_html(page)})"
        for page in pages()
        if page != "README.md" and not (out / page_html(page)).is_file()
    ]
    parsed = {}
    for path in sorted(out.rglob("*.html")):
        if "_static" in path.relative_to(out).parts:  # the theme's own template fragments, not pages
            continue
        page = _Page()
        page.feed(path.read_text(encoding="utf-8"))
        parsed[path.resolve()] = page
    for path, page in parsed.items():
        rel = path.relative_to(out.resolve())
        problems += [
            f"{rel}: an image without alt text: {img.get('src', '')[:80]}"
            for img in page.images
            if not (img.get("alt") or "").strip()
        ]
        problems += [f"{rel}: a diagram without a label" for d in page.diagrams if not (d.get("aria-label") or "")]
        for href in page.links:
            problem = _link_problem(path, href, parsed)
            if problem:
                problems.append(f"{rel}: {problem}")
    return problems


def _link_problem(path: Path, href: str, parsed: dict[Path, _Page]) -> str | None:
    parts = urlsplit(href)
    if parts.scheme or parts.netloc or href.startswith(("mailto:", "javascript:")):
        return None
    target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
    if not target.exists():
        return f"link {href!r} points to a file that does not exist"
    if target.is_dir():
        return f"link {href!r} points to a folder, not a file (a browser shows an empty listing, or nothing)"
    if parts.fragment and target.suffix == ".html":
        page = parsed.get(target)
        if page is not None and unquote(parts.fragment) not in page.ids:
            return f"link {href!r}: no anchor {unquote(parts.fragment)!r} in {target.name}"
    return None


def build(out: Path) -> list[str]:
    """Stage, build and check the site; the problems (empty: the site is good)."""
    src = BUILD / "src"
    problems = stage(src)
    if problems:
        return problems
    if out.exists():
        shutil.rmtree(out)
    run = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q", "-c", str(CONF), str(src), str(out)],
        capture_output=True,
        text=True,
    )
    if run.returncode:
        return [line.replace(str(src) + "/", "") for line in run.stderr.splitlines() if line.strip()] or [
            f"sphinx-build exited {run.returncode}"
        ]
    committed_downloads(out)
    return check_output(out) + download_problems(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=BUILD / "html", help="where the site goes (default build/site/html)")
    args = ap.parse_args(argv)
    try:
        problems = build(args.out.resolve())
    except (SiteError, subprocess.CalledProcessError) as exc:
        print(f"site: {exc}", file=sys.stderr)
        return 1
    if problems:
        print(f"site: {len(problems)} problem(s):", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    print(f"site: built {len(pages())} pages into {args.out} (open {args.out / 'index.html'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
