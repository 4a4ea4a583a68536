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

ROOT = Path(__file__).resolve().parent.parent
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
