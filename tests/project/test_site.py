"""The course site and its two reference pages: the cheat-sheet's code runs, its facts match the library, the glossary
is linked right, every figure has alt text, and the site's own checks catch what they promise to.

The whole build (Sphinx, a minute) runs in CI as `python3 dev.py site`; here the sources are checked without it, and
the HTML checker is run on small pages made to fail.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from streamlab.core.standin.scenarios import scenario

ROOT = Path(__file__).resolve().parents[2]
CHEATSHEET = (ROOT / "docs" / "cheatsheet.md").read_text(encoding="utf-8")
GLOSSARY = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")


def _site():
    spec = importlib.util.spec_from_file_location("course_site", ROOT / "tools" / "course_site.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


site = _site()


@pytest.mark.net
def test_every_code_block_of_the_cheatsheet_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", CHEATSHEET, re.S)
    assert len(blocks) == 2
    for block in blocks:
        exec(compile(block, "cheatsheet.md", "exec"), {})  # noqa: S102 - the page's own examples
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["message 'hello'", "done '[DONE]'"]
    assert out[2].startswith("complete complete w00 ") and out[3].startswith("complete: [DONE] arrived")


def test_the_cheatsheet_names_the_stand_ins_models_and_subcommands_that_exist():
    models = re.search(r"Stand-in models in `scenario\(\"all\"\)`: (.*)", CHEATSHEET, re.S).group(1)
    assert set(re.findall(r"`([\w-]+)`", models)) == set(scenario("all"))
    help_text = subprocess.run(
        [sys.executable, "-m", "streamlab", "--help"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    commands = set(re.search(r"\{([\w,-]+)\}", help_text).group(1).split(","))
    used = set(re.findall(r"^streamlab ([a-z][\w-]*)", CHEATSHEET, re.M))
    assert used == commands, f"the cheat-sheet lists {sorted(used)}, the command line has {sorted(commands)}"


def test_the_glossary_tells_ending_and_outcome_apart():
    from streamlab.core.endings import Ending, Outcome

    entries = dict(re.findall(r"^### (.+?)\n\n(.*?)(?=^#{2,3} |\Z)", GLOSSARY, re.S | re.M))
    ending, outcome = entries["ending"], entries["outcome"]
    assert "[outcome](#outcome)" in ending and "bytes" in ending
    assert all(f"`{o.value}`" in outcome for o in Outcome)  # the five outcomes, each named
    named = set(re.findall(r"`([a-z_]+)`", ending + outcome))
    assert (
        {"complete", "cut", "client_gone", "broken", "http_error"}
        <= named
        <= {e.value for e in Ending}
        | {o.value for o in Outcome}
        | {"length", "content_filter", "response.incomplete", "finish_reason"}
    )


@pytest.mark.parametrize("page", ["docs/glossary.md", "docs/cheatsheet.md"])
def test_every_link_of_the_reference_pages_lands(page: str):
    text = (ROOT / page).read_text(encoding="utf-8")
    for link in re.findall(r"\]\(([^)\s]+)\)", text):
        if link.startswith("http"):
            continue
        path, _, fragment = link.partition("#")
        target = (ROOT / page).parent / path if path else ROOT / page
        assert target.is_file(), f"{page}: {link} points to nothing"
        if fragment:
            anchors = set(site.anchors_of(target.resolve().relative_to(ROOT).as_posix()).values())
            assert fragment in anchors, f"{page}: no section #{fragment} in {target.name}"


def test_every_figure_of_every_lab_has_alt_text_and_every_link_a_target():
    assert site.source_problems() == []
    for page in site.labs():
        assert page in site.pages()


def test_a_new_figure_without_alt_text_is_refused(tmp_path: Path):
    page = "notebooks/01-sse-by-hand.ipynb"
    nb = json.loads((ROOT / page).read_text(encoding="utf-8"))
    texts = json.loads(site.ALT_TEXT.read_text(encoding="utf-8"))["01-sse-by-hand.ipynb"]
    assert site.alt_problems({"01-sse-by-hand.ipynb": texts}, [page]) == []
    (problem,) = site.alt_problems({}, [page])
    assert "has 1 figure(s) and 0 alt text(s)" in problem
    (problem,) = site.alt_problems(
        {"01-sse-by-hand.ipynb": {**texts, "no-such-cell": ["a figure that is gone"]}}, [page]
    )
    assert "no-such-cell" in problem and "no figure" in problem
    (problem,) = site.alt_problems({"01-sse-by-hand.ipynb": texts, "99-gone.ipynb": {}}, [page])
    assert "no notebook 99-gone.ipynb" in problem
    staged = site.staged_notebook(nb, json.loads(site.ALT_TEXT.read_text(encoding="utf-8"))["01-sse-by-hand.ipynb"])
    diagram = next(c for c in staged["cells"] if c.get("id") == "ee617904")
    assert '<pre class="mermaid" role="img" aria-label="Sequence diagram: ' in diagram["source"]
    assert "```mermaid" not in diagram["source"]


def test_links_written_the_jupyterlab_way_point_to_the_sites_anchors():
    text = "see [the rules](01-sse-by-hand.ipynb#3.-The-rules) and [here](#Exercises) and [x](nowhere.ipynb#A)"
    fixed = site.site_links(text, "notebooks/interview-questions.md")
    assert "(01-sse-by-hand.ipynb#3-the-rules)" in fixed
    assert "[x](nowhere.ipynb#A)" in fixed  # not a page: left for the build to refuse
    assert site.jupyterlab_anchor("5. How a stream ends: five outcomes") == "5.-How-a-stream-ends:-five-outcomes"
    assert site.github_anchor("5. How a stream ends: five outcomes") == "5-how-a-stream-ends-five-outcomes"


def test_the_html_check_finds_missing_alt_text_dead_links_and_missing_anchors(tmp_path: Path):
    out = tmp_path / "html"
    (out / "notebooks").mkdir(parents=True)
    for page in site.pages():
        if page != "README.md":
            (out / (page.rsplit(".", 1)[0] + ".html")).parent.mkdir(parents=True, exist_ok=True)
            (out / (page.rsplit(".", 1)[0] + ".html")).write_text("<p id='top'>ok</p>", encoding="utf-8")
    (out / "index.html").write_text(
        '<img src="a.png" alt="a chart"><a href="notebooks/README.html#top">ok</a><a href="https://x.org">out</a>',
        encoding="utf-8",
    )
    assert site.check_output(out) == []
    (out / "index.html").write_text(
        '<img src="a.png"><img src="b.png" alt=" "><pre class="mermaid">graph</pre>'
        '<a href="gone.html">dead</a><a href="notebooks/README.html#nowhere">no anchor</a>',
        encoding="utf-8",
    )
    (out / "docs" / "glossary.html").unlink()
    problems = site.check_output(out)
    assert sum("without alt text" in p for p in problems) == 2
    assert any("a diagram without a label" in p for p in problems)
    assert any("'gone.html' points to a file that does not exist" in p for p in problems)
    assert any("no anchor 'nowhere' in README.html" in p for p in problems)
    assert any(p.startswith("missing page: docs/glossary.md") for p in problems)


def _page_with_download(href: str) -> str:
    """A page as the Book theme writes it: its download menu's ".ipynb" (or ".md") button."""
    return (
        f'<p id="top">ok</p><a href="{href}" target="_blank"\n   class="btn btn-sm btn-download-source-button '
        'dropdown-item"\n   title="Download source file">.ipynb</a>'
    )


def test_every_download_button_offers_its_pages_committed_file(tmp_path: Path):
    """The ".ipynb" button of every page used to open an empty `_sources/` folder (the sources were not copied):
    a link to a folder is refused, and after the build's last step every button offers the page's own file, as
    committed (not the staged copy whose links were rewritten for the site)."""
    out = tmp_path / "html"
    for page in site.pages():
        html_page = out / site.page_html(page)
        html_page.parent.mkdir(parents=True, exist_ok=True)
        depth = "../" * (len(Path(site.page_html(page)).parts) - 1)
        html_page.write_text(_page_with_download(f"{depth}_sources/"), encoding="utf-8")
    (out / "_sources").mkdir()
    assert any("'../_sources/' points to a folder" in p for p in site.check_output(out))
    assert len(site.download_problems(out)) == len(site.pages())

    for page in site.pages():
        staged = "index.md" if page == "README.md" else page
        depth = "../" * (len(Path(site.page_html(page)).parts) - 1)
        (out / site.page_html(page)).write_text(_page_with_download(f"{depth}_sources/{staged}"), encoding="utf-8")
        (out / "_sources" / staged).parent.mkdir(parents=True, exist_ok=True)
        (out / "_sources" / staged).write_text("the staged copy, links rewritten", encoding="utf-8")
    problems = site.download_problems(out)
    assert len(problems) == len(site.pages()) and "does not offer notebooks/01-sse-by-hand.ipynb" in " ".join(problems)

    site.committed_downloads(out)
    assert site.download_problems(out) == [] and site.check_output(out) == []
    lab = out / "_sources" / "notebooks" / "01-sse-by-hand.ipynb"
    assert lab.read_bytes() == (ROOT / "notebooks" / "01-sse-by-hand.ipynb").read_bytes()


def test_the_site_copies_the_sources_its_download_buttons_point_to():
    """docs/site/conf.py keeps the copy the buttons need, under the page's own name (no ".txt" added)."""
    spec = importlib.util.spec_from_file_location("site_conf", ROOT / "docs" / "site" / "conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    assert conf.html_copy_source is True and conf.html_sourcelink_suffix == ""
    assert conf.html_theme_options["use_download_button"] is True
