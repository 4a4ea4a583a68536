"""Sphinx settings for the course site (`python3 dev.py site`; test tooling outside the package).

`tools/course_site.py` stages the course's pages (the labs with their committed outputs, the guides, the glossary and
the cheat-sheet) into one source folder and runs Sphinx with this folder as its configuration: MyST-NB reads
the notebooks without executing them, MyST the Markdown, and the Book theme draws the pages. Nothing is fetched
at build time: the theme's assets ship in its wheel, and the diagrams are drawn in the reader's browser by the
`mermaid` package's own script, copied from npm into `_static/` by the build.

The quizzes: a saved quiz output holds the widget's view (which cannot draw here: the canonical notebooks keep no
widget state) and the quiz as answer-free HTML; the HTML is shown, and `_static/quiz.js` makes it interactive
with the texts `setup` writes into `_static/quiz-NN.js` from the quiz files (`streamlab.tools.quizview.site_quiz`).
The labs' other widgets (explorers) cannot draw without a kernel: `_static/widget-note.js` says so in their place.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
GENERATED = HERE.parent.parent / "build" / "site" / "static"  # mermaid.min.js, copied there from npm by the build
QUIZZES = HERE.parent.parent / "build" / "site" / "quiz"  # quiz-NN.js, written by setup() below

project = "streamlab"
author = "the streamlab authors"
copyright = "the streamlab authors, MIT licence"
root_doc = "index"

extensions = ["myst_nb"]
nb_execution_mode = "off"  # the committed outputs are the course: never re-run a lab to build its page
nb_merge_streams = True
myst_enable_extensions = ["colon_fence", "dollarmath", "html_image"]
myst_heading_anchors = 6
# GitHub's anchors (tools/course_site.py rewrites the labs' JupyterLab-style ones to them)
suppress_warnings = ["mystnb.unknown_mime_type"]  # widget views: not saved in the committed outputs
# A quiz's answer-free HTML before its widget view, which has no saved state to draw (quiz.js makes it live)
nb_mime_priority_overrides = [("html", "text/html", 5)]

html_theme = "sphinx_book_theme"
html_title = "streamlab: streamed model output, byte by byte"
html_static_path = [str(HERE / "_static"), str(GENERATED), str(QUIZZES)]
html_css_files = ["site.css"]
html_js_files = ["mermaid.min.js", "mermaid-init.js", "quiz.js", "widget-note.js"]
html_theme_options = {"show_toc_level": 2, "use_download_button": True, "home_page_in_toc": True}
# The theme's download button (".ipynb" on a lab) links to the page's copied source: without the copy it pointed to
# an empty _sources/ folder. tools/course_site.py then puts the committed file there, not the staged one.
html_copy_source = True
html_sourcelink_suffix = ""
html_show_sourcelink = False
exclude_patterns = ["_build", "README.md"]  # README.md is the home page, included by index.md


def write_quizzes(folder: Path) -> list[Path]:
    """Write every lab's quiz as `quiz-NN.js` in `folder` (what quiz.js loads: one small script per lab page)."""
    from streamlab.tools.quiz import available_quizzes, load_quiz
    from streamlab.tools.quizview import site_quiz

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for lab in available_quizzes():
        data = json.dumps(site_quiz(load_quiz(lab)), ensure_ascii=False, separators=(",", ":"))
        path = folder / f"quiz-{lab}.js"
        path.write_text(
            f"window.streamlabQuizzes = window.streamlabQuizzes || {{}};\n"
            f"window.streamlabQuizzes[{json.dumps(lab)}] = {data};\n",
            encoding="utf-8",
        )
        written.append(path)
    return written


def setup(app: Any) -> dict[str, Any]:
    """Write the quizzes' texts before the build copies the static files."""
    app.connect("config-inited", lambda _app, _config: write_quizzes(QUIZZES), priority=100)
    return {"parallel_read_safe": True}
