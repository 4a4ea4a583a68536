"""Check that the repository builds unchanged as a Binder / JupyterHub image with repo2docker, and opens on the labs
(a development tool outside the package, run from any folder).

    .venv/bin/python tools/binder_check.py                  the static checks: environment.yml, postBuild,
                                                            .dockerignore, no binder/ folder
    .venv/bin/python tools/binder_check.py --repo2docker jupyter-repo2docker
                                                            also render repo2docker's Dockerfile without Docker
                                                            (`--no-build --debug`) and check what it will do

Exit 0 when everything holds, 1 with one line per problem otherwise. repo2docker is not a dependency of the
project: install it anywhere (`pip install jupyter-repo2docker` in a virtual environment of its own) and name
its executable. tests/project/test_binder.py runs the static checks always, and the Dockerfile check when repo2docker
is installed (importable, on the PATH, or named by $STREAMLAB_REPO2DOCKER).

What repo2docker does with this repository (read from its Dockerfile, version 2026.4): its conda build pack
picks a base environment by the exact `python=X.Y` in environment.yml (a range gets its moving default),
copies the repository into the image first (the pip section installs `-e .` and reads `-c constraints.txt`,
both relative to environment.yml's folder), runs `mamba env update -p ${NB_PYTHON_PREFIX} --file
"environment.yml"`, whose pip lines run from that folder, then `./postBuild`. A `binder/` or `.binder/` folder
would make it ignore the top-level files, so there must be none. Its command is `jupyter notebook`; postBuild
sets the default URL that command (and `jupyter lab`, and JupyterHub's single-user server) opens.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pip, present in every virtual environment, vendors the same parser
    from pip._vendor import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
LABS_URL = "/lab/tree/notebooks/README.md"
"""Where the image opens: the labs' index, rendered (postBuild sets it)."""
LAB_EXTRAS = frozenset({"lab", "peers"})
"""The extras the labs need in the image: JupyterLab and a kernel, and the libraries the labs drive."""
KEEP_IN_IMAGE = (
    ".git",
    "notebooks",
    "data",
    "streamlab",
    "tools",
    "environment.yml",
    "constraints.txt",
    "pyproject.toml",
    "postBuild",
    "README.md",
    "INSTRUCTORS.md",
)
"""What .dockerignore must not leave out: the labs, the package, the build inputs, and .git (learners reset a
notebook with git)."""
MUST_IGNORE = (".venv",)
"""What .dockerignore must leave out: a developer's virtual environment (large, and useless in the image)."""
R2D_PYTHON = re.compile(r"python\s*=+\s*([\d.]*)")
"""repo2docker's own rule for reading the Python version in environment.yml (`python=3.11`)."""


def _load_yaml(path: Path) -> object:
    try:
        import yaml
    except ImportError:  # pragma: no cover - PyYAML comes with JupyterLab's dependencies in .venv
        sys.exit("binder_check needs PyYAML: run it with .venv/bin/python")
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _pip_lines(env: object) -> list[str]:
    deps = env.get("dependencies", []) if isinstance(env, dict) else []
    for dep in deps:
        if isinstance(dep, dict) and isinstance(dep.get("pip"), list):
            return [str(line) for line in dep["pip"]]
    return []


def python_version(env: object) -> str | None:
    """The X.Y repo2docker reads from environment.yml, or None when it would fall back to its default."""
    deps = env.get("dependencies", []) if isinstance(env, dict) else []
    for dep in deps:
        match = R2D_PYTHON.match(dep) if isinstance(dep, str) else None
        if match and match.group(1):
            return ".".join(match.group(1).split(".")[:2])
    return None


def _extras(spec: str, pyproject: dict) -> set[str]:
    """The extras `.[a,b]` asks for, with the project's own `streamlab[...]` references expanded."""
    match = re.fullmatch(r"\.\[([\w,\s-]+)\]", spec)
    wanted = {e.strip() for e in match.group(1).split(",")} if match else set()
    optional = pyproject["project"].get("optional-dependencies", {})
    name = pyproject["project"]["name"]
    seen: set[str] = set()
    while wanted - seen:
        extra = (wanted - seen).pop()
        seen.add(extra)
        for req in optional.get(extra, []):
            inner = re.fullmatch(rf"{re.escape(name)}\[([\w,\s-]+)\]", req.replace(" ", ""))
            if inner:
                wanted |= set(inner.group(1).split(","))
    return seen


def environment_problems(root: Path = ROOT) -> list[str]:
    """What is wrong with environment.yml as repo2docker (and `conda env create`) will read it."""
    problems: list[str] = []
    path = root / "environment.yml"
    if not path.is_file():
        return ["environment.yml is missing: repo2docker would build no conda environment"]
    env = _load_yaml(path)
    pyproject = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    version = python_version(env)
    floor = re.search(r">=\s*(\d+\.\d+)", pyproject["project"].get("requires-python", ""))
    if version is None:
        problems.append(
            "environment.yml: no exact `python=X.Y`: repo2docker would use its default Python, which "
            "moves with its releases"
        )
    elif floor and tuple(map(int, version.split("."))) < tuple(map(int, floor.group(1).split("."))):
        problems.append(f"environment.yml: python={version} is older than pyproject's requires-python")
    lines = _pip_lines(env)
    options = [line.split(None, 1) for line in lines if line.startswith("-")]
    constraints = [
        arg.strip().strip("\"'") for flag, *rest in options if flag in ("-c", "--constraint") for arg in rest
    ]
    if not constraints:
        problems.append(
            "environment.yml: the pip section has no `-c constraints.txt`: the image would not get the "
            "versions the committed outputs were made with"
        )
    problems += [
        f"environment.yml: `-c {c}` names no file beside environment.yml"
        for c in constraints
        if not (path.parent / c).is_file()
    ]
    editable = [arg.strip().strip("\"'") for flag, *rest in options if flag in ("-e", "--editable") for arg in rest]
    if not editable:
        problems.append('environment.yml: the pip section does not install the project (`-e ".[all]"`)')
    for spec in editable:
        missing = LAB_EXTRAS - _extras(spec, pyproject)
        if missing:
            problems.append(f"environment.yml: `-e {spec}` leaves out the extras the labs need: {sorted(missing)}")
    if not any(re.match(r"notebook\s*[<>=~!]", line) for line in lines):
        problems.append(
            "environment.yml: no `notebook` requirement: repo2docker's base environment keeps a notebook "
            "that requires an older JupyterLab than constraints.txt pins, and its command is `jupyter "
            "notebook`"
        )
    return problems


def _git_mode(root: Path, name: str) -> str | None:
    git = shutil.which("git")
    if git is None or not (root / ".git").exists():
        return None
    out = subprocess.run([git, "ls-files", "--stage", "--", name], cwd=root, capture_output=True, text=True)
    return out.stdout.split()[0] if out.returncode == 0 and out.stdout.strip() else None


def postbuild_problems(root: Path = ROOT) -> list[str]:
    """What is wrong with postBuild: present, executable (on disk and in git), stops at the first error, and
    sets the labs' default URL for the applications that read one."""
    path = root / "postBuild"
    if not path.is_file():
        return ["postBuild is missing: the image would open the notebook file tree, not the labs"]
    text = path.read_text(encoding="utf-8")
    problems = []
    if not os.access(path, os.X_OK):
        problems.append("postBuild is not executable (chmod +x postBuild)")
    mode = _git_mode(root, "postBuild")
    if mode not in (None, "100755"):
        problems.append(f"postBuild is committed with mode {mode}, not 100755 (git update-index --chmod=+x postBuild)")
    if not text.startswith("#!/bin/bash\n") or "set -euo pipefail" not in text:
        problems.append(
            "postBuild should start with #!/bin/bash and `set -euo pipefail`, so a failed step fails the build"
        )
    if f'LABS_URL="{LABS_URL}"' not in text or not (root / LABS_URL.removeprefix("/lab/tree/")).is_file():
        problems.append(f"postBuild should open {LABS_URL}, a file of this repository")
    for app in ("JupyterNotebookApp", "LabApp"):
        if f'"{app}"' not in text:
            problems.append(f"postBuild sets no {app}.default_url")
    return problems


def layout_problems(root: Path = ROOT) -> list[str]:
    """No binder/ folder (repo2docker would ignore the top-level files), and a .dockerignore that leaves the
    developer's .venv out of the image but keeps what the labs need."""
    problems = [
        f"{name}/ exists: repo2docker would read its configuration there and ignore environment.yml and "
        "postBuild at the top"
        for name in ("binder", ".binder")
        if (root / name).is_dir()
    ]
    ignore = root / ".dockerignore"
    patterns = (
        [
            line.strip()
            for line in ignore.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.lstrip().startswith("#")
        ]
        if ignore.is_file()
        else []
    )
    for name in MUST_IGNORE:
        if not any(fnmatch.fnmatch(name, p) for p in patterns):
            problems.append(f".dockerignore does not leave out {name}: a working copy's build would copy it in")
    for name in KEEP_IN_IMAGE:
        hit = [p for p in patterns if fnmatch.fnmatch(name, p) or fnmatch.fnmatch(name, p.strip("/"))]
        if hit:
            problems.append(f".dockerignore leaves out {name} ({hit[0]}), which the image needs")
    return problems


def static_problems(root: Path = ROOT) -> list[str]:
    return environment_problems(root) + postbuild_problems(root) + layout_problems(root)


def render_dockerfile(repo2docker: str, root: Path = ROOT) -> tuple[str, str]:
    """Run `repo2docker --no-build --debug` on `root` (no Docker needed): (the Dockerfile, its log)."""
    done = subprocess.run(
        [repo2docker, "--no-build", "--debug", "--user-id", "1000", "--user-name", "jovyan", str(root)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{repo2docker} --no-build --debug failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout, done.stderr


def dockerfile_problems(dockerfile: str, log: str, root: Path = ROOT) -> list[str]:
    """What repo2docker's Dockerfile (and log) say it would do wrong with this repository."""
    problems = []
    want = python_version(_load_yaml(root / "environment.yml"))
    picked = re.search(r"Building conda environment for python=([\d.]+)", log)
    if picked is None:
        problems.append("repo2docker did not pick its conda build pack (no 'Building conda environment' in its log)")
    elif picked.group(1) != want:
        problems.append(f"repo2docker builds Python {picked.group(1)}, environment.yml asks for {want}")
    lines = dockerfile.splitlines()

    def first(pattern: str) -> int | None:
        return next((n for n, line in enumerate(lines) if re.search(pattern, line)), None)

    copy = first(r"^COPY .*\bsrc/ \$\{REPO_DIR\}/")
    update = first(r'env update -p \$\{NB_PYTHON_PREFIX\} --file "environment\.yml"')
    post = first(r"^RUN \./postBuild$")
    cmd = re.search(r'^CMD \["([^"]+)", "([^"]+)"', dockerfile, re.M)
    if update is None:
        problems.append('the Dockerfile never runs `env update ... --file "environment.yml"` (the top-level file)')
    elif copy is None or copy > update:
        problems.append(
            "the repository is not copied in before environment.yml is installed: `-e .` and "
            "`-c constraints.txt` need it"
        )
    if post is None:
        problems.append("the Dockerfile never runs ./postBuild")
    elif update is not None and post < update:
        problems.append("postBuild runs before environment.yml is installed")
    if cmd is None or cmd.group(1) != "jupyter" or cmd.group(2) not in ("notebook", "lab"):
        problems.append(
            f"the image's command is {cmd.group(0) if cmd else 'missing'}: postBuild sets the default URL "
            "of `jupyter notebook` and `jupyter lab` only"
        )
    return problems


def find_repo2docker() -> str | None:
    """repo2docker's executable: $STREAMLAB_REPO2DOCKER, `jupyter-repo2docker` beside this Python or on the PATH."""
    named = os.environ.get("STREAMLAB_REPO2DOCKER")
    if named:
        return named if os.access(named, os.X_OK) else None
    beside = Path(sys.executable).parent / "jupyter-repo2docker"
    return str(beside) if beside.exists() else shutil.which("jupyter-repo2docker")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--repo2docker",
        metavar="EXECUTABLE",
        help="jupyter-repo2docker to render the Dockerfile with (default: static checks only)",
    )
    args = parser.parse_args(argv)
    problems = static_problems()
    if args.repo2docker:
        dockerfile, log = render_dockerfile(args.repo2docker)
        problems += dockerfile_problems(dockerfile, log)
    for problem in problems:
        print(f"binder_check: {problem}")
    if not problems:
        what = "the static checks and repo2docker's Dockerfile" if args.repo2docker else "the static checks"
        print(f"binder_check: {what} hold: the image installs environment.yml and opens {LABS_URL}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
