"""The public surface, stated once in ``tickq/__init__.py``, is the one the reference shows.

The reference (docs/reference.md) is rendered by mkdocstrings; here griffe, its loader,
reads the source the same way, and mkdocstrings' own member filter picks what each ``:::``
directive shows, with the options of mkdocs.yml and of the directive. That is compared
with ``dir()`` of the real objects: a public method added without a docstring (or on a
mixin the reference does not render), or an internal made public, fails here, in about a
second, without building the site.
"""

from __future__ import annotations

import importlib
import os
import re
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import tickq

try:
    import griffe
    import mkdocstrings_handlers.python as rendering
    import yaml
except ImportError as exc:  # CI=true: the docs extra is required, as Postgres is
    if os.environ.get("CI"):
        raise
    pytest.skip(f"pip install -e '.[docs]' to check the reference: {exc}", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference.md"
DIRECTIVE = re.compile(r"^::: (?P<path>\S+)\n(?P<options>(?:    .*\n)*)", re.M)
# Public once, internal by decision: a regression guard, not a second list of the surface.
QUEUE_INTERNALS = {"store", "runtime", "registry", "owner", "lease_keeper", "insert", "new_job",
                   "notify_failed", "notify_retried", "schedules", "definition"}  # fmt: skip
INTERNAL = {
    "tickq.queue.Queue": QUEUE_INTERNALS,
    "tickq.registry.JobFunction": {"queue", "definition"},
}


def directives(text: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each ``::: path`` of a page with its own ``options:``."""
    for m in DIRECTIVE.finditer(text):
        block = yaml.safe_load(textwrap.dedent(m["options"])) if m["options"] else None
        yield m["path"], (block or {}).get("options") or {}


def global_options() -> dict[str, Any]:
    # mkdocs.yml may carry tags mkdocs resolves (!ENV, !!python/name); none matter here.
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("", lambda loader, suffix, node: None)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)
    for plugin in config["plugins"]:
        if isinstance(plugin, dict) and "mkdocstrings" in plugin:
            python = plugin["mkdocstrings"]["handlers"]["python"]
            return dict(python.get("options", {}), paths=python.get("paths", ["."]))
    raise AssertionError("mkdocs.yml configures no mkdocstrings python handler")


@pytest.fixture(scope="module")
def package() -> Any:
    options = global_options()
    return griffe.load(
        "tickq",
        search_paths=[str(ROOT / p) for p in options["paths"]],
        docstring_parser=options.get("docstring_style", "google"),
    )


def lookup(package: Any, path: str) -> Any:
    return package[path.removeprefix("tickq.")] if path != "tickq" else package


def shown(obj: Any, options: dict[str, Any]) -> set[str]:
    """The member names the reference renders for ``obj``, as mkdocstrings picks them."""
    filters = [(re.compile(f.removeprefix("!")), f.startswith("!")) for f in options["filters"]]
    kept = rendering.do_filter_objects(
        obj.all_members,
        filters=filters,
        members_list=options.get("members"),
        inherited_members=options.get("inherited_members", False),
        keep_no_docstrings=options.get("show_if_no_docstring", False),
    )
    return {m.name for m in kept}


def public_names(obj: Any) -> set[str]:
    """``dir(obj)``'s public names that tickq defines (not those of ``tuple``, ``str``...)."""
    cls = obj if isinstance(obj, type) else type(obj)
    ours = [c for c in cls.__mro__ if c.__module__.split(".")[0] == "tickq"]
    own = getattr(obj, "__dict__", {}) if not isinstance(obj, type) else {}
    return {
        n for n in dir(obj)
        if not n.startswith("_") and (n in own or any(n in vars(c) for c in ours))
    }  # fmt: skip


def surface_classes(package: Any, tmp_path: Path) -> dict[str, Any]:
    """Every public class by its canonical path, as an instance where instances carry
    attributes of their own (a Queue's ``url``, a job function's ``name``)."""
    paths = [f"tickq.{n}" for n in tickq.__all__ if isinstance(getattr(tickq, n), type)]
    paths += tickq._PUBLIC_TYPES
    q = tickq.Queue(f"sqlite:///{tmp_path / 'surface.db'}")

    def greet() -> None:
        """A job."""

    instances: dict[type, Callable[[], Any]] = {
        tickq.Queue: lambda: q,
        tickq.FrozenClock: tickq.FrozenClock,
        type(q.job(greet)): lambda: q.job(name="again")(greet),
    }
    classes = {}
    for path in paths:
        module, _, name = path.rpartition(".")
        cls = getattr(importlib.import_module(module), name)
        classes[lookup(package, path).canonical_path] = instances.get(cls, lambda c=cls: c)()
    return classes


def problems(package: Any, reference: str, real: dict[str, Any]) -> list[str]:
    """What differs between the public classes and what the reference shows of them."""
    options = global_options()
    found: list[str] = []
    by_target: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for path, own in directives(reference):
        by_target.setdefault(lookup(package, path).canonical_path, []).append((path, own))
    for canonical, obj in sorted(real.items()):
        listed = by_target.get(canonical, [])
        if len(listed) != 1:
            found.append(f"{canonical}: {len(listed)} directives in docs/reference.md, not 1")
            continue
        path, own = listed[0]
        rendered = shown(lookup(package, path), {**options, **own})
        public = public_names(obj)
        if missing := sorted(public - rendered):
            found.append(f"{path}: public but not in the reference: {missing}")
        if extra := sorted(rendered - public):
            found.append(f"{path}: in the reference but not public: {extra}")
        if leaked := sorted(public & INTERNAL.get(canonical, set())):
            found.append(f"{path}: internal names made public: {leaked}")
    return found


def test_every_public_class_shows_exactly_its_public_members(package: Any, tmp_path: Path) -> None:
    real = surface_classes(package, tmp_path)
    assert {"tickq.queue.Queue", "tickq.registry.JobFunction", "tickq.job.Job"} <= set(real)
    assert problems(package, REFERENCE.read_text(), real) == []


def test_queue_has_no_internals_in_its_public_names(tmp_path: Path) -> None:
    q = tickq.Queue(f"sqlite:///{tmp_path / 'q.db'}")
    names = {n for n in dir(q) if not n.startswith("_")}
    assert not names & QUEUE_INTERNALS
    assert {"enqueue", "enqueue_many", "get_job", "retry", "cancel", "pause", "stats",
            "prune", "asgi_app", "webhook", "clock", "alerts"} <= names  # fmt: skip


def test_a_public_method_without_docs_fails(
    package: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tickq.Queue, "frobnicate", lambda self: None, raising=False)
    found = problems(package, REFERENCE.read_text(), surface_classes(package, tmp_path))
    assert found == ["tickq.Queue: public but not in the reference: ['frobnicate']"]


def test_an_internal_made_public_fails(
    package: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tickq.Queue, "store", property(lambda self: self._store), raising=False)
    found = problems(package, REFERENCE.read_text(), surface_classes(package, tmp_path))
    assert found == [
        "tickq.Queue: public but not in the reference: ['store']",
        "tickq.Queue: internal names made public: ['store']",
    ]


def test_inherited_methods_left_out_of_the_reference_fail(package: Any, tmp_path: Path) -> None:
    without = REFERENCE.read_text().replace("      inherited_members: true\n", "", 1)
    found = problems(package, without, surface_classes(package, tmp_path))
    assert len(found) == 1 and "'enqueue'" in found[0] and "'asgi_app'" in found[0]


def surface_paths(package: Any) -> set[str]:
    """Canonical paths of everything public: the names, the modules and what they export."""
    paths = {lookup(package, f"tickq.{n}").canonical_path for n in tickq.__all__}
    paths |= {lookup(package, t).canonical_path for t in tickq._PUBLIC_TYPES}
    for name in tickq._PUBLIC_MODULES:
        module = importlib.import_module(name)
        paths.add(name)
        for n in module.__all__:
            try:
                paths.add(lookup(package, f"{name}.{n}").canonical_path)
            except KeyError:  # made on first use (a module ``__getattr__``): its own path
                paths.add(f"{name}.{n}")
    return paths


def test_the_reference_documents_only_the_public_surface(package: Any) -> None:
    public = surface_paths(package)
    options = global_options()
    for path, own in directives(REFERENCE.read_text()):
        obj = lookup(package, path)
        assert obj.canonical_path in public, f"{path} is documented but not public"
        if obj.is_module:  # the members a module directive shows are its public ones
            exported = set(importlib.import_module(path).__all__)
            assert shown(obj, {**options, **own}) <= exported, path


def test_every_public_name_is_in_the_reference(package: Any) -> None:
    documented = {lookup(package, p).canonical_path for p, _ in directives(REFERENCE.read_text())}
    for name in [n for n in tickq.__all__ if n != "__version__"] + list(tickq._PUBLIC_TYPES):
        assert lookup(package, f"tickq.{name.removeprefix('tickq.')}").canonical_path in (
            documented
        ), f"{name} is public but docs/reference.md has no directive for it"


@pytest.mark.parametrize("name", [*tickq._PUBLIC_MODULES, *tickq._PUBLIC_TYPES])
def test_no_public_module_says_it_is_internal(name: str) -> None:
    module = name if name in tickq._PUBLIC_MODULES else name.rpartition(".")[0]
    doc = importlib.import_module(module).__doc__ or ""
    assert not doc.startswith("Internal:"), f"{module} is public; its docstring says internal"


IMPORT = re.compile(r"^\s*from (tickq(?:\.[\w.]+)?) import \(?([\w, \n]+?)\)?$", re.M)


def documented_imports() -> Iterator[tuple[str, str, str]]:
    """(page, module, name) of each ``from tickq... import name`` in the docs, the README and
    the examples' own code (their tests may reach inside)."""
    pages = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
    pages += [p for p in sorted((ROOT / "examples").rglob("*.py")) if "test" not in p.name
              and "dj_tests" not in p.parts]  # fmt: skip
    for page in pages:
        for m in IMPORT.finditer(page.read_text()):
            for name in m[2].replace("\n", " ").split(","):
                if name.strip():
                    yield str(page.relative_to(ROOT)), m[1], name.split(" as ")[0].strip()


def test_the_docs_import_only_the_public_surface() -> None:
    """What a reader copies from the docs must be public: a page importing from an internal
    module (``tickq.retention`` before it was listed) would break on the next refactor."""
    found = list(documented_imports())
    assert len(found) > 40, "the pattern no longer finds the docs' imports"
    wrong = []
    for page, module, name in found:
        if module == "tickq":
            ok = name in tickq.__all__
        else:
            ok = module in tickq._PUBLIC_MODULES and name in importlib.import_module(module).__all__
        if not ok:
            wrong.append(f"{page}: from {module} import {name}")
    assert not wrong, "documented imports outside the public surface:\n" + "\n".join(wrong)
