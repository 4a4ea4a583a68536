"""The repository as a Binder / JupyterHub image (repo2docker): it installs from environment.yml, opens on the labs.

Three levels. The static checks of tools/binder_check.py always run: environment.yml asks for an exact Python
and installs the project with the extras the labs need under constraints.txt, postBuild is executable and sets
the labs' default URL, .dockerignore keeps the developer's .venv out and the labs in, no binder/ folder hides
the top-level files; each check is also shown finding the problem it is for. postBuild itself runs, into a
temporary environment prefix, and a real JupyterLab reading what it wrote redirects to the labs' index and
serves the classroom settings. When repo2docker is installed, the Dockerfile it renders for this repository
(`--no-build --debug`, no Docker needed) is checked too; repo2docker is not a project dependency, so that test
says how to run it when it skips.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tools.binder_check import (
    LABS_URL,
    ROOT,
    dockerfile_problems,
    find_repo2docker,
    render_dockerfile,
    static_problems,
)
from tools.browser import JupyterLabServer

OVERRIDES = json.loads((ROOT / "tools" / "jupyterlab" / "overrides.json").read_text(encoding="utf-8"))
MARKDOWN_RENDERED = {"@jupyterlab/docmanager-extension:plugin": {"defaultViewers": {"markdown": "Markdown Preview"}}}


def test_the_repository_passes_the_static_checks() -> None:
    assert static_problems() == []


def _copy(tmp_path: Path) -> Path:
    """The files the static checks read, in a folder of their own."""
    for name in (
        "environment.yml",
        "pyproject.toml",
        "constraints.txt",
        "postBuild",
        ".dockerignore",
        "notebooks/README.md",
    ):
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    return tmp_path


def _edit(name: str, old: str, new: str):
    def apply(root: Path) -> None:
        path = root / name
        text = path.read_text(encoding="utf-8")
        assert old in text, f"{name} no longer holds {old!r}: update this test"
        path.write_text(text.replace(old, new), encoding="utf-8")

    return apply


BREAKAGES = {
    "a Python range": (_edit("environment.yml", "python=3.11", "python>=3.10,<3.14"), "no exact `python=X.Y`"),
    "a Python older than requires-python": (_edit("environment.yml", "python=3.11", "python=3.9"), "older than"),
    "no constraints": (_edit("environment.yml", "      - -c constraints.txt\n", ""), "no `-c constraints.txt`"),
    "constraints elsewhere": (_edit("environment.yml", "-c constraints.txt", "-c pins.txt"), "names no file"),
    "the test extras only": (_edit("environment.yml", '".[all]"', '".[test]"'), "['lab', 'peers']"),
    "the project not installed": (_edit("environment.yml", '      - -e ".[all]"\n', ""), "does not install"),
    "the base notebook kept": (_edit("environment.yml", "      - notebook>=7.6,<8\n", ""), "no `notebook`"),
    "postBuild not executable": (lambda root: (root / "postBuild").chmod(0o644), "not executable"),
    "postBuild without set -e": (_edit("postBuild", "set -euo pipefail", "true"), "set -euo pipefail"),
    "another default URL": (_edit("postBuild", LABS_URL, "/lab/tree/nowhere.md"), f"should open {LABS_URL}"),
    "no LabApp default": (_edit("postBuild", '"LabApp"', '"OtherApp"'), "no LabApp.default_url"),
    "a binder folder": (lambda root: (root / "binder").mkdir(), "binder/ exists"),
    ".venv copied in": (_edit(".dockerignore", ".venv\n", ""), "does not leave out .venv"),
    ".git left out": (_edit(".dockerignore", ".venv\n", ".venv\n.git\n"), "leaves out .git"),
}


@pytest.mark.parametrize("breakage", BREAKAGES, ids=list(BREAKAGES))
def test_each_static_check_finds_the_problem_it_is_for(tmp_path: Path, breakage: str) -> None:
    root = _copy(tmp_path)
    assert static_problems(root) == []  # the copy is as good as the original...
    apply, expected = BREAKAGES[breakage]
    apply(root)
    problems = static_problems(root)  # ...until one thing breaks, and exactly that is reported
    assert len(problems) == 1 and expected in problems[0], problems


def _run_postbuild(prefix: Path) -> subprocess.CompletedProcess[str]:
    """postBuild as repo2docker runs it: from the repository root, the environment's bin first on the PATH."""
    env = dict(
        os.environ,
        NB_PYTHON_PREFIX=str(prefix),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    )
    return subprocess.run(["./postBuild"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def _server_config(prefix: Path) -> Path:
    return prefix / "etc" / "jupyter" / "jupyter_server_config.json"


def _lab_overrides(prefix: Path) -> Path:
    return prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.d" / "streamlab.json"


def test_postbuild_sets_the_labs_default_url_and_the_classroom_settings_in_the_environment(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    config = _server_config(prefix)
    config.parent.mkdir(parents=True)
    before = {"ServerApp": {"shutdown_no_activity_timeout": 600}, "LabApp": {"collaborative": True}}
    config.write_text(json.dumps(before))

    for _ in range(2):  # a rebuild runs it again: same result
        done = _run_postbuild(prefix)
        assert done.returncode == 0, done.stdout + done.stderr

    written = json.loads(config.read_text())
    assert written["JupyterNotebookApp"] == {"default_url": LABS_URL}  # `jupyter notebook`, repo2docker's command
    assert written["LabApp"] == {"collaborative": True, "default_url": LABS_URL}  # what was there is kept
    assert written["ServerApp"] == {"shutdown_no_activity_timeout": 600}  # a hub's Spawner.default_url still wins
    assert json.loads(_lab_overrides(prefix).read_text()) == {**OVERRIDES, **MARKDOWN_RENDERED}
    assert (ROOT / LABS_URL.removeprefix("/lab/tree/")).is_file()


def test_postbuild_fails_the_build_when_the_labs_cannot_import(tmp_path: Path) -> None:
    broken = tmp_path / "bin"
    broken.mkdir()
    (broken / "python3").write_text("#!/bin/sh\nexec false\n")
    (broken / "python3").chmod(0o755)
    env = dict(
        os.environ, NB_PYTHON_PREFIX=str(tmp_path / "env"), PATH=os.pathsep.join([str(broken), "/usr/bin", "/bin"])
    )
    done = subprocess.run(["./postBuild"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert not _server_config(tmp_path / "env").exists()  # it stopped at the first failure


@pytest.mark.net
@pytest.mark.slow
def test_a_jupyterlab_with_what_postbuild_wrote_opens_on_the_rendered_labs_index(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    done = _run_postbuild(prefix)
    assert done.returncode == 0, done.stdout + done.stderr
    extra = tmp_path / "extra-config"  # the image reads the app settings from its prefix; here we point at ours
    extra.mkdir()
    settings = _lab_overrides(prefix).parent.parent
    (extra / "jupyter_server_config.json").write_text(json.dumps({"LabApp": {"app_settings_dir": str(settings)}}))
    env = dict(os.environ, JUPYTER_CONFIG_PATH=os.pathsep.join([str(_server_config(prefix).parent), str(extra)]))

    with (
        JupyterLabServer(ROOT, env=env, log_path=tmp_path / "jupyterlab.log") as lab,
        httpx.Client(base_url=lab.url, trust_env=False, timeout=30) as http,
    ):
        home = http.get("/", follow_redirects=False)
        assert home.status_code == 302 and home.headers["location"].rstrip("?").endswith(LABS_URL)
        index = http.get("/api/contents/" + LABS_URL.removeprefix("/lab/tree/"), params={"content": "0"})
        assert index.status_code == 200 and index.json()["type"] == "file"

        def defaults(plugin: str) -> dict:
            schema = http.get(f"/lab/api/settings/{plugin}").json()["schema"]
            return {name: spec.get("default") for name, spec in schema["properties"].items()}

        assert defaults("@jupyterlab/docmanager-extension:plugin")["defaultViewers"] == {"markdown": "Markdown Preview"}
        assert defaults("@jupyterlab/apputils-extension:notification")["fetchNews"] == "false"


def test_repo2dockers_dockerfile_installs_environment_yml_then_runs_postbuild() -> None:
    repo2docker = find_repo2docker()
    if repo2docker is None:
        pytest.skip(
            "repo2docker is not installed (not a project dependency). To run this check: "
            "python3 -m venv /tmp/r2d && /tmp/r2d/bin/pip install jupyter-repo2docker, then "
            "STREAMLAB_REPO2DOCKER=/tmp/r2d/bin/jupyter-repo2docker, or "
            "`.venv/bin/python tools/binder_check.py --repo2docker /tmp/r2d/bin/jupyter-repo2docker`"
        )
    dockerfile, log = render_dockerfile(repo2docker)
    assert dockerfile_problems(dockerfile, log) == []
    assert "RUN ./postBuild" in dockerfile and '--file "environment.yml"' in dockerfile


def test_the_dockerfile_check_reads_repo2dockers_output() -> None:
    """On a trimmed copy of what repo2docker 2026.4 prints for this repository, and on the same text broken."""
    good = "\n".join(
        [
            "FROM docker.io/library/buildpack-deps:24.04",
            "COPY --chown=1000:1000 src/ ${REPO_DIR}/",
            "USER ${NB_USER}",
            "RUN TIMEFORMAT='time: %3R' \\",
            'bash -c \'time ${MAMBA_EXE} env update -p ${NB_PYTHON_PREFIX} --file "environment.yml" && \\',
            "RUN chmod +x postBuild",
            "RUN ./postBuild",
            'CMD ["jupyter", "notebook", "--ip", "0.0.0.0"]',
        ]
    )
    log = "Picked Local content provider.\nBuilding conda environment for python=3.11\n"
    assert dockerfile_problems(good, log) == []
    assert "builds Python 3.10" in dockerfile_problems(good, log.replace("3.11", "3.10"))[0]
    no_post = good.replace("RUN ./postBuild\n", "")
    assert dockerfile_problems(no_post, log) == ["the Dockerfile never runs ./postBuild"]
    in_binder = good.replace('"environment.yml"', '"binder/environment.yml"')
    assert "top-level file" in dockerfile_problems(in_binder, log)[0]
    other_cmd = good.replace('"jupyter", "notebook"', '"voila", "index.ipynb"')
    assert "image's command" in dockerfile_problems(other_cmd, log)[0]
