"""README's Layout section names every package and top-level module of src/nkisim, and nothing
that is not there."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _layout_block() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Layout"):]
    return section[section.index("```") + 3:section.index("```", section.index("```") + 3)]


def test_layout_names_every_package_and_module():
    block = _layout_block()
    src = ROOT / "src" / "nkisim"
    packages = {p.name for p in src.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.name for p in src.glob("*.py") if p.name != "__init__.py"}
    named = set(re.findall(r"\b([a-z_][a-z0-9_]*)/", block)) | set(re.findall(r"\b([a-z_]+\.py)\b", block))
    assert packages - named == set(), "packages missing from README Layout"
    assert modules - named == set(), "modules missing from README Layout"
    anywhere = {p.name for p in src.rglob("*")}
    stale = {n for n in named - anywhere if n not in ("src", "nkisim", "tests", "benchmarks")}
    assert stale == set(), "README Layout names what is not in the tree"
