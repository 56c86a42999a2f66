"""The layers (docs/design.md, "Where things live"): models imports neither api nor workers,
at any level; no module reads another's private names; api reaches workers only where the web
process is assembled. Read from the source with ast: nothing is imported."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("api", "models", "workers")
SOURCES = [path for name in PACKAGES for path in sorted((ROOT / name).rglob("*.py"))]
SOURCES.append(ROOT / "beat_schedule.py")
# The web process's assembly (api.app.get_app): the task publisher and the broker's checks.
API_TAKES_FROM_WORKERS = {"api/app.py": {"workers.broker", "workers.enqueue"}}


def module_of(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def is_ours(name: str) -> bool:
    """Whether `name` is a module or package of the repository."""
    where = ROOT.joinpath(*name.split("."))
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def imported(node: ast.ImportFrom, module: str, package: bool) -> str:
    """The absolute name a `from … import` takes from, relative ones resolved."""
    if not node.level:
        return node.module or ""
    parts = module.split(".") if package else module.split(".")[:-1]
    base = parts[: len(parts) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports(source: str, module: str, package: bool = False) -> Iterator[tuple[int, str]]:
    """Every module an import names (line, name), inside functions too; `from m import n`
    gives `m.n` when that is a module of ours, else `m`."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = imported(node, module, package)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield node.lineno, full if is_ours(full) else base


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def dotted(node: ast.expr) -> str | None:
    """`a.b.c` as written, or None for anything but names and attributes."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        parent = dotted(node.value)
        return None if parent is None else f"{parent}.{node.attr}"
    return None


def module_aliases(tree: ast.Module, module: str, package: bool) -> dict[str, str]:
    """The names bound to modules: `import a.b` (a), `import a.b as c`, and `from a import b`
    where a.b is a module of ours."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    aliases[top] = top
        elif isinstance(node, ast.ImportFrom):
            base = imported(node, module, package)
            for alias in node.names:
                if is_ours(f"{base}.{alias.name}"):
                    aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
    return aliases


def private_reads(source: str, module: str, package: bool = False) -> list[str]:
    """`from m import _x`, and `alias._x` (or `alias.sub._x`) where alias names a module of
    ours: another module's private name read. Dunder names (`__version__`) are public."""
    tree = ast.parse(source)
    found = [
        f"{node.lineno}: from {imported(node, module, package)} import {alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if private(alias.name)
    ]
    aliases = module_aliases(tree, module, package)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and private(node.attr)):
            continue
        written = dotted(node.value)
        if written is None:
            continue
        head, _, rest = written.partition(".")
        if head not in aliases:
            continue
        target = ".".join(filter(None, [aliases[head], rest]))
        if not is_ours(target):
            continue  # something a module holds, or a library's (os._exit is public)
        found.append(f"{node.lineno}: {target}.{node.attr}")
    return found


def where(path: Path) -> tuple[str, bool]:
    return module_of(path), path.name == "__init__.py"


def test_models_imports_neither_api_nor_workers() -> None:
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in SOURCES
        if path.relative_to(ROOT).parts[0] == "models"
        for line, name in imports(path.read_text(), *where(path))
        if name.split(".")[0] in ("api", "workers")
    ]
    assert wrong == []


def test_no_module_reads_another_modules_private_names() -> None:
    wrong = [
        f"{path.relative_to(ROOT)}:{read}"
        for path in SOURCES
        for read in private_reads(path.read_text(), *where(path))
    ]
    assert wrong == []


def test_api_takes_from_workers_only_where_the_web_process_is_assembled() -> None:
    taken: dict[str, set[str]] = {}
    for path in SOURCES:
        if path.relative_to(ROOT).parts[0] != "api":
            continue
        for _, name in imports(path.read_text(), *where(path)):
            if name.split(".")[0] == "workers":
                taken.setdefault(str(path.relative_to(ROOT)), set()).add(name)
    assert taken == API_TAKES_FROM_WORKERS


def test_the_checks_see_what_they_look_for() -> None:
    inside = "def f():\n    from api.representations import header\n"
    assert list(imports(inside, "models.jobs.events")) == [(2, "api.representations")]
    assert list(imports("from api import representations\n", "models.x")) == [
        (1, "api.representations")
    ]
    assert list(imports("import workers.app\n", "models.x")) == [(1, "workers.app")]
    relative = "from ...api import representations\n"
    assert list(imports(relative, "models.jobs.events")) == [(1, "api.representations")]
    assert private_reads("from models.jobs.events import _hidden\n", "api.x") == [
        "1: from models.jobs.events import _hidden"
    ]
    aliased = "from models.jobs import events\nevents._hidden()\n"
    assert private_reads(aliased, "api.x") == ["2: models.jobs.events._hidden"]
    chained = "import models.jobs.events\nmodels.jobs.events._hidden()\n"
    assert private_reads(chained, "api.x") == ["2: models.jobs.events._hidden"]
    public = "import os\nfrom models.jobs import events\nevents.__name__\nevents.E._x\nos._exit\n"
    assert private_reads(public, "api.x") == []
    own = "def _mine():\n    pass\n\n\nclass A:\n    def f(self):\n        self._x = _mine()\n"
    assert private_reads(own, "api.x") == []
