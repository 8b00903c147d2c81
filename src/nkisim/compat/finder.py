"""Serves ``nki``, ``nki.*``, ``nki_cpu_simulator`` and ``nki_cpu_simulator.nki.*`` (the module name
of AWS's simulator wheel, which nki-library's simulation harness imports) from ``nkisim.nki`` (the
Beta-2 face), and ``neuronxcc`` and ``neuronxcc.nki.*`` from ``nkisim.nki_beta1`` (the Beta-1 face,
issue 15) — only where no real package resolves first. The finder sits at the END of ``sys.meta_path``, so every normal
finder (and thus an installed Neuron SDK) wins; nothing is patched. Imported at start-up by the
``nkisim_faces.pth`` file, so this module imports only the standard library.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NKI_DIR = os.path.join(_PKG_DIR, "nki")                 # the Beta-2 face
_BETA1_DIR = os.path.join(_PKG_DIR, "nki_beta1")         # the Beta-1 face
# packages whose ``.nki`` is a face, and which face
_WRAPPERS = {"neuronxcc": _BETA1_DIR, "nki_cpu_simulator": _NKI_DIR}


def _face_path(parts, root=_NKI_DIR):
    """File of the face module for ``nki.<parts>`` under ``root`` and whether it is a package."""
    base = os.path.join(root, *parts)
    if os.path.isdir(base):
        return os.path.join(base, "__init__.py"), True
    if os.path.isfile(base + ".py"):
        return base + ".py", False
    return None, False


class NkiFaceFinder:
    """Meta path finder for the ``nki`` faces, consulted after all standard finders."""

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        parts = fullname.split(".")
        if len(parts) > 1:
            # A submodule only under our own face: never graft it onto a real SDK package.
            parent = sys.modules.get(".".join(parts[:-1]))
            if parent is None or not _is_face(parent):
                return None
        root = _NKI_DIR
        if parts[0] == "nki":
            rest = parts[1:]
        elif parts[0] in _WRAPPERS:
            if len(parts) == 1:
                return importlib.machinery.ModuleSpec(fullname, _EmptyPackage(), is_package=True)
            if parts[1] != "nki":
                return None
            rest, root = parts[2:], _WRAPPERS[parts[0]]
        else:
            return None
        origin, is_pkg = _face_path(rest, root)
        if origin is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, origin, submodule_search_locations=[] if is_pkg else None)


def _is_face(module) -> bool:
    spec = getattr(module, "__spec__", None)
    return spec is not None and (isinstance(spec.loader, _EmptyPackage) or
                                 (spec.origin or "").startswith((_NKI_DIR + os.sep, _BETA1_DIR + os.sep)))


class _EmptyPackage:
    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__path__ = []


def install() -> None:
    """Append the finder once (idempotent)."""
    if not any(f is NkiFaceFinder for f in sys.meta_path):
        sys.meta_path.append(NkiFaceFinder)


__all__ = ["NkiFaceFinder", "install"]
