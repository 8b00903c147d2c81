"""Findings as data: one JSON record per NkiError (``record``), the document ``nkisim run --json``
writes (``document``) and the JSON Schema it follows (``SCHEMA_PATH``, shipped in the package).
A command-line layer module: imports the nki.isa / nki.language faces only to name operands.
"""
from __future__ import annotations

import importlib
import inspect
import json
import os
import re

from .errors import FindingsError, NkiError

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemas", "findings.schema.json")
FORMAT_VERSION = 1

_FACES = {"nisa": "nkisim.isa", "nl": "nkisim.language", "ncc": "nkisim.collectives"}
_PARAMS: dict = {}
_LIMIT = re.compile(r"\bexceeds (?:the )?(-?\d+(?:\.\d+)?)\b")


def _parameters(op: str) -> tuple:
    """The documented parameter names of ``op`` ("nisa.tensor_tensor"), () if it is no function."""
    hit = _PARAMS.get(op)
    if hit is None:
        hit = ()
        prefix, _, name = op.partition(".")
        if prefix in _FACES and name.isidentifier():
            try:
                fn = getattr(importlib.import_module(_FACES[prefix]), name, None)
                hit = tuple(inspect.signature(fn).parameters) if callable(fn) else ()
            except (ImportError, TypeError, ValueError):
                hit = ()
        _PARAMS[op] = hit
    return hit


def operand_of(err: NkiError) -> str | None:
    """The operand an error names: the one the raising check gave, else the first word of its
    message when that is a parameter of the op (the messages name operands first, by their public
    parameter name: "moving free size 1024 exceeds 512"). Decision: None when neither holds (the
    rule is about the op as a whole, e.g. a target that lacks it)."""
    if err.operand is not None:
        return err.operand
    first = re.match(r"[A-Za-z_][A-Za-z_0-9]*", err.what or "")
    if first and first.group(0) in _parameters(err.op):
        return first.group(0)
    return None


def limit_of(err: NkiError):
    """The limit an error names: the one the raising check gave, else the number after
    "exceeds" in its message (e.g. 512 in "... exceeds 512 on trn2"), else None."""
    if err.limit is not None:
        return err.limit
    m = _LIMIT.search(err.what or "")
    if m:
        text = m.group(1)
        return float(text) if "." in text else int(text)
    return None


def record(err: NkiError) -> dict:
    """One finding as a JSON-ready dict: rule (the error class, as the findings report groups
    them), op, operand, limit, file (full name when known), line, message (``str(err)``), fatal
    (True for a rule that is always fatal: the kernel stopped there, whatever ``findings`` mode;
    ``runtime.launch.mark_fatal``)."""
    limit = limit_of(err)
    if isinstance(limit, (set, frozenset, tuple)):
        limit = sorted(limit) if isinstance(limit, (set, frozenset)) else list(limit)
    return {"rule": type(err).__name__, "op": err.op, "operand": operand_of(err), "limit": limit,
            "file": err.file, "line": err.line, "message": str(err), "fatal": bool(getattr(err, "fatal", False))}


def flatten(errors) -> list:
    """NkiErrors with every FindingsError replaced by the findings it holds (in order), each once."""
    out, seen = [], set()
    for e in errors:
        for f in (e.findings if isinstance(e, FindingsError) else [e]):
            if id(f) not in seen:
                seen.add(id(f))
                out.append(f)
    return out


def document(script: str, status: int, launches: int, errors, settings: dict) -> dict:
    """The ``nkisim run --json`` document: the script, its exit status, how many kernel launches it
    made, the settings it ran with and one record per finding (FindingsErrors unpacked)."""
    return {"version": FORMAT_VERSION, "script": os.path.abspath(script), "status": status,
            "launches": launches, "settings": settings, "findings": [record(e) for e in flatten(errors)]}


def write(path: str, doc: dict) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2, default=str)
        fh.write("\n")


def schema() -> dict:
    with open(SCHEMA_PATH, encoding="utf-8") as fh:
        return json.load(fh)


__all__ = ["record", "document", "flatten", "write", "schema", "operand_of", "limit_of", "SCHEMA_PATH",
           "FORMAT_VERSION"]
