"""The layering of ARCHITECTURE.md, read from the source (every import statement, lazy ones
included): each layer imports only the layers below it; memory never imports checks, language,
isa, runtime or torch; only the torch layer and the layers above it import torch."""
import ast
import pathlib
import subprocess
import sys

import nkisim

SRC = pathlib.Path(nkisim.__file__).parent

# Rank of each top-level part of nkisim (ARCHITECTURE.md, bottom up); equal ranks may import
# each other. ``nkisim/__init__`` is the lazy front door, not a layer.
RANK = {
    "arch": 0, "dtypes": 0, "config": 0, "errors": 0, "state": 0, "progress": 0,
    "memory": 1,
    "trace": 2,
    "checks": 3,
    "runtime": 4,
    "isa": 5, "language": 5, "collectives": 5,
    "compat": 6, "nki": 6, "nki_beta1": 6,
    "torch": 7,
    "kernels": 8, "examples": 8,
    "models": 9,
    "demo": 10, "cli": 10, "__main__": 10, "ops_table": 10, "findings": 10, "pytest_plugin": 10,
}
TORCH_RANK = RANK["torch"]

# Known upward imports, each to be removed by its owner (say which and why).
KNOWN = {
    # nl.dynamic_range yields isa's VirtualRegister (lazy import); the loop belongs with the
    # register type (isa) or the language layer, not runtime.
    ("nkisim.runtime.loops", "nkisim.isa.registers"),
}


def _module(path: pathlib.Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _submodule(stem: str, name: str) -> str:
    """``from stem import name``: the module ``stem.name`` if there is one, else ``stem``."""
    path = SRC.parent.joinpath(*f"{stem}.{name}".split("."))
    return f"{stem}.{name}" if path.with_suffix(".py").exists() or (path / "__init__.py").exists() else stem


def imports():
    """(module, imported module) for every import statement in nkisim that names nkisim or torch."""
    for path in sorted(SRC.rglob("*.py")):
        mod = _module(path)
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - node.level + 1]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module
                targets = [_submodule(stem, a.name) for a in node.names]
            else:
                continue
            for target in targets:
                if target.split(".")[0] in ("nkisim", "torch"):
                    yield mod, target


def _layer(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if parts[0] == "nkisim" and len(parts) > 1 else None


ALL = sorted(set(imports()))


def test_the_import_scan_sees_the_package():
    assert ("nkisim.memory.access", "nkisim.memory.hooks") in ALL
    assert ("nkisim.checks", "nkisim.memory.hooks") in ALL
    assert any(m.startswith("nkisim.torch.") and t == "torch" for m, t in ALL)
    assert {_layer(m) for m, _ in ALL if _layer(m)} <= set(RANK), "a new top-level part: give it a rank"


def test_memory_imports_no_higher_layer():
    bad = [(m, t) for m, t in ALL if _layer(m) == "memory"
           and (t.split(".")[0] == "torch" or _layer(t) in ("checks", "language", "isa", "runtime", "torch",
                                                             "trace"))]
    assert bad == []


def test_only_the_torch_layer_and_above_import_torch():
    bad = [(m, t) for m, t in ALL if t.split(".")[0] == "torch" and _layer(m) is not None
           and RANK[_layer(m)] < TORCH_RANK]
    assert bad == []


def test_no_import_goes_up_a_layer():
    up = {(m, t) for m, t in ALL if _layer(m) and _layer(t) in RANK and RANK[_layer(t)] > RANK[_layer(m)]}
    assert up - KNOWN == set()
    assert KNOWN <= up, "a known upward import is gone: drop it from KNOWN"


def test_importing_memory_loads_no_higher_layer():
    code = ("import sys\nbefore = set(sys.modules)\n"       # (the nki face finder loads at start-up)
            "import nkisim.memory, nkisim.memory.access, nkisim.memory.indirect\n"
            "print(' '.join(sorted(m for m in set(sys.modules) - before if m.startswith(('nkisim.', 'torch')))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = out.stdout.split()
    assert "nkisim.memory.hooks" in loaded
    assert [m for m in loaded if _layer(m) not in ("memory", "arch", "dtypes", "config", "errors",
                                                   "state")] == []
