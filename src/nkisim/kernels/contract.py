"""The kernel library's argument contract: shapes checked when a kernel starts.

Imports nothing from nkisim (kernel arguments are read through ``.shape`` only).
"""
from __future__ import annotations


def check_shapes(kernel: str, **args) -> dict:
    """ValueError unless every argument has the shape its kernel's docstring gives.

    ``args``: parameter name -> (tensor, dims); ``dims`` a space-separated string of dimension
    names ("T H") or a sequence of names and ints. A name is bound by its first occurrence (in
    keyword order) and every later occurrence must match it; an int must match exactly. Returns
    the bound names (name -> size).
    Raises ValueError naming the kernel, the argument, its shape, the expected shape with the
    bound sizes, and where each bound size came from, e.g. ``swiglu_mlp_kernel: w_down has shape
    [305, 200], expected [I, H] = [300, 200] (I from w_gate, H from x)``.
    Decision: a kernel given inconsistent shapes stops before its first instruction, where it
    would otherwise read past a tile's written part (NaN outputs) or silently use a slice.
    """
    bound: dict = {}
    source: dict = {}
    for name, (tensor, dims) in args.items():
        dims = dims.split() if isinstance(dims, str) else list(dims)
        shape = [int(n) for n in tensor.shape]
        want = [bound.get(d, d) if isinstance(d, str) else d for d in dims]
        ok = len(shape) == len(dims) and all(not isinstance(w, int) or w == s for w, s in zip(want, shape))
        if not ok:
            names = ", ".join(str(d) for d in dims)
            sizes = ", ".join(str(w) for w in want)
            froms = [f"{d} from {source[d]}" for d in dims if isinstance(d, str) and d in source]
            said = f" = [{sizes}]" if sizes != names else ""
            why = f" ({', '.join(froms)})" if froms else ""
            raise ValueError(f"{kernel}: {name} has shape {shape}, expected [{names}]{said}{why}")
        for d, s in zip(dims, shape):
            if isinstance(d, str) and d not in bound:
                bound[d], source[d] = s, name
    return bound


def check_grouped_heads(kernel: str, dims: dict) -> None:
    """ValueError unless the query heads ``dims["Hq"]`` are a multiple of the kv heads
    ``dims["Hkv"]`` (grouped-query attention: query head h reads kv head h // (Hq // Hkv))."""
    if dims["Hq"] % dims["Hkv"]:
        raise ValueError(f"{kernel}: Hq = {dims['Hq']} query heads must be a multiple of Hkv = "
                         f"{dims['Hkv']} kv heads")


__all__ = ["check_shapes", "check_grouped_heads"]
