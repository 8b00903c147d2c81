"""The ``nki_kernel_wrapper`` HigherOrderOperator (mutating) and its functional twin, one short
implementation per dispatch key or mode, and the explicit fallthrough list.

Mutating HOP: runs the kernel; inputs it writes are updated in place; returns the kernel's result
(an input returned by the kernel is that input; several results are a tuple in every mode).
Functionalization turns it into ``nki_kernel_wrapper_functional``, which clones the written inputs
and every input sharing storage with one (one clone per distinct storage, views re-derived from
it, pytorch#196657), runs the mutating HOP on the clones and returns (new outputs..., clones...);
the functionalize impl then replaces each cloned input by its clone, so aliases survive every mode.
Fake/Meta build outputs from the kernel's Layout (registry.describe_outputs), never a simulation
of real data. Autograd: a tensor argument that requires grad (grad mode on) is a ValueError in
every mode, as in eager. Errors raised while Dynamo traces a call are re-raised so that
``except NkiError`` still works (``_traceable``). Imports torch and the torch layer; never isa or checks.
"""
from __future__ import annotations

import contextlib

import torch
import torch.utils._pytree as pytree
from torch._C import DispatchKey
from torch._ops import HigherOrderOperator
from torch._prims_common import clone_preserve_strides
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import (ProxyTorchDispatchMode, disable_proxy_modes_tracing,
                                                track_tensor_tree)

from ..errors import SimulatorOffError
from .registry import check_result, describe_outputs, kernel_side_table
from ..config import Settings
from .simulate import simulate_nki_kernel

###############################################################################
# The two HOPs


class _NKIKernelWrapperBase(HigherOrderOperator):
    def _get_overloaded_args(self, args, kwargs):
        extra = [a for a in kwargs.get("args", ()) if isinstance(a, torch.Tensor)
                 and torch._C._dispatch_keys(a).has("Python")]
        return tuple(super()._get_overloaded_args(args, kwargs)) + tuple(extra)


class NKIKernelWrapper(_NKIKernelWrapperBase):
    """Runs one NKI kernel; may write its tensor inputs in place.

    Decision: ``cacheable=False`` — kernels and constants live in this process's side table, so an
    FX/AOT cache entry must not be replayed in another process.
    """

    def __init__(self):
        super().__init__("nki_kernel_wrapper", cacheable=False)

    def __call__(self, *, kernel_idx, grid, backend_config, operand_output_aliases, args, arg_names,
                 constant_args_key):
        if not torch.compiler.is_compiling() and not operand_output_aliases:
            route = _plain_cpu_route(self, args)
            if route is not None:
                with route:
                    return nki_kernel_wrapper_cpu(kernel_idx=kernel_idx, grid=grid,
                                                  backend_config=backend_config,
                                                  operand_output_aliases=operand_output_aliases,
                                                  args=args, arg_names=arg_names,
                                                  constant_args_key=constant_args_key)
        return super().__call__(kernel_idx=kernel_idx, grid=grid, backend_config=backend_config,
                                operand_output_aliases=operand_output_aliases, args=args,
                                arg_names=arg_names, constant_args_key=constant_args_key)


class NKIKernelWrapperFunctional(_NKIKernelWrapperBase):
    """Runs one NKI kernel on clones of ``tensors_to_clone``; returns (new outputs..., clones...)."""

    def __init__(self):
        super().__init__("nki_kernel_wrapper_functional", cacheable=False)

    def __call__(self, *, kernel_idx, grid, backend_config, operand_output_aliases, args, arg_names,
                 constant_args_key, tensors_to_clone):
        return super().__call__(kernel_idx=kernel_idx, grid=grid, backend_config=backend_config,
                                operand_output_aliases=operand_output_aliases, args=args,
                                arg_names=arg_names, constant_args_key=constant_args_key,
                                tensors_to_clone=tensors_to_clone)


nki_kernel_wrapper = NKIKernelWrapper()

_PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)
_PLAIN_LEAVES = frozenset((int, float, bool, str, type(None), torch.dtype))
_tls_include = torch._C._dispatch_tls_local_include_set
_tls_exclude = torch._C._dispatch_tls_local_exclude_set
_tensor_keys = torch._C._dispatch_keys
_CPU, _AUTOGRAD_CPU = DispatchKey.CPU, DispatchKey.AutogradCPU


def _plain_cpu_route(hop, args):
    """A context manager to run ``hop``'s CPU impl in, when torch's dispatch of a call with these
    ``args`` would go straight to that impl; else None (take the full dispatch).

    Decision (speed; no visible effect): the eager call of a kernel on plain CPU tensors is
    answered without ``HigherOrderOperator.__call__``'s two pytree flattenings, key extractions
    and autograd redispatch (~60-100 us per launch). The test is torch's own: every argument is
    a plain ``Tensor``/``Parameter`` or a scalar leaf (anything else, e.g. a list, takes the full
    path), no ``__torch_function__`` override or mode, and the dispatch key set torch computes
    (``torch._ops.key_extractor`` with the HOP's non-fallthrough keys, thread-local include and
    exclude sets applied, so any dispatch mode, functionalization, fake or meta tensor shows up)
    has CPU highest -- or AutogradCPU with grad off or no tensor requiring grad, where torch's
    ``maybe_run_autograd`` redispatches below autograd (then the impl runs under the same
    ``_AutoDispatchBelowAutograd`` guard, after checking the key set there is CPU too)."""
    tensors = []
    for a in args:
        ta = type(a)
        if ta in _PLAIN_TENSORS:
            tensors.append(a)
        elif ta not in _PLAIN_LEAVES:
            return None
    if not tensors:
        return None
    tensors = tuple(tensors)
    if torch._C._has_torch_function(tensors):
        return None
    keys = _tls_include()                       # torch._ops.key_extractor, the tensors' part once
    for t in tensors:
        keys = keys | _tensor_keys(t)
    mask = hop.non_fallthrough_keys
    key = ((keys - _tls_exclude()) & mask).highestPriorityTypeId()
    if key == _CPU:
        return contextlib.nullcontext()
    if key != _AUTOGRAD_CPU:
        return None
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return None
    with torch._C._AutoDispatchBelowAutograd():
        below = ((keys - _tls_exclude()) & mask).highestPriorityTypeId()
    return torch._C._AutoDispatchBelowAutograd() if below == _CPU else None

nki_kernel_wrapper_functional = NKIKernelWrapperFunctional()

###############################################################################
# Shared helpers


def _lnc(grid) -> int:
    return int(grid[0]) if grid else 1


def _named(args, arg_names, constant_args_key) -> dict:
    named = dict(zip(arg_names, args))
    named.update(kernel_side_table.get_constant_args(constant_args_key))
    return named


def _layout(kernel_idx, grid, named):
    try:
        return describe_outputs(kernel_side_table.get_kernel(kernel_idx), _lnc(grid), named)
    except Exception as exc:
        new = _traceable(exc)
        if new is exc:
            raise
        raise new from exc


_TRACEABLE: dict = {}


def _traceable(exc: Exception) -> Exception:
    """``exc`` itself, or (while Dynamo traces) an equal exception whose class subclasses both its
    class and ``torch._dynamo.exc.Unsupported``.

    Decision: Dynamo wraps every other exception raised while it propagates fake tensors in a
    TorchRuntimeError whose ``__cause__`` is None (``_wrap_graph_break_with_torch_runtime_err``
    raises ``from None``), so ``except NkiError`` could not catch a kernel error found while
    tracing; an Unsupported passes through unwrapped. With ``fullgraph=True`` the caller gets this
    exception (still a ShapeError/NkiError/ValueError; the message starts with the original text,
    Dynamo appends the user frames); without it Dynamo breaks the graph, runs the call eagerly,
    and the kernel raises the original error there.
    """
    from torch._dynamo.exc import TorchDynamoException, Unsupported
    from torch._guards import TracingContext
    if isinstance(exc, TorchDynamoException) or TracingContext.try_get() is None:
        return exc
    cls = type(exc)
    sub = _TRACEABLE.get(cls)
    if sub is None:
        def __reduce__(self):
            r = cls.__reduce__(self)
            return (cls,) + tuple(r[1:])
        try:
            sub = type(cls.__name__, (cls, Unsupported), {"__module__": cls.__module__,
                                                         "__qualname__": cls.__qualname__,
                                                         "__reduce__": __reduce__})
        except TypeError:            # a builtin base whose layout cannot be mixed: keep exc
            return exc
        _TRACEABLE[cls] = sub
    new = sub.__new__(sub, *exc.args)
    new.args = exc.args
    new.__dict__.update(exc.__dict__)
    new.msg, new.gb_type, new.skip_frame, new.logged = str(exc), "nkisim kernel error", False, False
    new.real_stack = TracingContext.extract_stack()
    new.add_to_stats()
    new.__traceback__ = exc.__traceback__
    return new


def _check_devices(named) -> None:
    """Meta and real tensors in one call are an error, as in torch (outputs would lie)."""
    devs = [(n, v.device) for n, v in named.items() if isinstance(v, torch.Tensor)]
    meta = next((n for n, d in devs if d.type == "meta"), None)
    real = next(((n, d) for n, d in devs if d.type != "meta"), None)
    if meta is not None and real is not None:
        raise RuntimeError(f"nki_kernel_wrapper: Tensor argument {meta!r} on device meta is not on "
                           f"the expected device {real[1]} (argument {real[0]!r}); pass every "
                           f"tensor argument on one device")


def _refuse_grad(*, args, arg_names, **_):
    """Autograd key (a tensor argument requires grad, grad mode on): NKI kernels have no backward."""
    name = next((n for n, v in zip(arg_names, args) if isinstance(v, torch.Tensor) and v.requires_grad),
                "?")
    raise _traceable(ValueError(
        f"nkisim.torch: kernel argument requires grad ({name!r}); NKI kernels run outside autograd — "
        f"pass tensor.detach() (it shares memory, so in-place writes still land)"))


def _out_device(named):
    """The first non-meta tensor's device (a meta weight must not make outputs meta), else meta."""
    devs = [v.device for v in named.values() if isinstance(v, torch.Tensor)]
    return next((d for d in devs if d.type != "meta"), torch.device("meta"))


def _new_outputs(layout, device) -> list:
    return [torch.empty(o.shape, dtype=o.dtype, device=device) for o in layout.outs if o.alias is None]


def _assemble(layout, named, new_outs):
    it = iter(new_outs)
    items = [named[o.alias] if o.alias else next(it) for o in layout.outs]
    return None if layout.kind == "none" else items[0] if layout.kind == "one" else tuple(items)


def _storage_key(t) -> int:
    """Identity of a tensor's storage (all views of one functional tensor share one)."""
    return t.untyped_storage()._cdata


def _with_aliases(named, names, written) -> tuple:
    """The written tensor arguments plus every tensor argument sharing storage with one, in
    argument order: a kernel that writes ``y`` and reads ``x`` aliasing it must read the clone."""
    keys = {n: _storage_key(named[n]) for n in names}
    hit = {keys[n] for n in names if n in written}
    return tuple(n for n in names if keys[n] in hit)


def _check_alias_views(wrapped, unwrapped, names) -> None:
    """Arguments among ``names`` (written ones and their aliases) that share a functional storage
    must still share storage once unwrapped, so the functional HOP's clones keep the alias.
    functionalize(remove="mutations_and_views") turns views into copies (and their metadata into
    the copies'), which cannot keep it: NotImplementedError. torch.compile keeps views as views."""
    groups: dict = {}
    for n in names:
        groups.setdefault(_storage_key(wrapped[n]), []).append(n)
    for members in groups.values():
        if len({_storage_key(unwrapped[n]) for n in members}) > 1:
            raise NotImplementedError(
                f"nki_kernel_wrapper: arguments {', '.join(map(repr, members))} are different views "
                f"of one tensor and the kernel writes one of them; this functionalization made the "
                f"views copies, so the alias cannot be kept (torch.compile and "
                f"functionalize(remove='mutations') keep it)")


def _clones(tensors: list) -> list:
    """One clone per distinct storage: equal views share one clone; different views of one storage
    become views of one cloned storage (so aliasing between arguments is kept)."""
    groups: dict = {}
    for t in tensors:
        groups.setdefault(_storage_key(t), []).append(t)
    made: dict = {}
    for members in groups.values():
        views = {(tuple(m.shape), tuple(m.stride()), m.storage_offset()) for m in members}
        if len(views) == 1:
            c = clone_preserve_strides(members[0])
            made.update({id(m): c for m in members})
        else:
            m0 = members[0]
            base = m0.as_strided((m0.untyped_storage().nbytes() // m0.element_size(),), (1,), 0).clone()
            made.update({id(m): base.as_strided(m.shape, m.stride(), m.storage_offset()) for m in members})
    return [made[id(t)] for t in tensors]


def _trace(mode, hop, node_args, track_filter=None):
    """Run ``hop`` untraced for example outputs, then record one call_function node."""
    with disable_proxy_modes_tracing():
        out = hop(**node_args)
    proxy_args = pytree.tree_map(mode.tracer.unwrap_proxy, node_args)
    proxy = mode.tracer.create_proxy("call_function", hop, (), proxy_args, name=hop.__name__ + "_proxy")
    tracked = track_filter(out) if track_filter else out
    track_tensor_tree(tracked, proxy, constant=None, tracer=mode.tracer)
    return out


_fallback_registered = False


def _register_inductor_fallback():
    """Inductor runs the functional HOP as an extern call (imported lazily: it is slow to import)."""
    global _fallback_registered
    if not _fallback_registered:
        from torch._inductor.lowering import make_fallback
        make_fallback(nki_kernel_wrapper_functional)
        _fallback_registered = True

###############################################################################
# nki_kernel_wrapper (mutating)


@nki_kernel_wrapper.py_impl(DispatchKey.CPU)
def nki_kernel_wrapper_cpu(*, kernel_idx, grid, backend_config, operand_output_aliases, args,
                           arg_names, constant_args_key):
    """Real CPU tensors: run the kernel in the simulator (needs NKI_SIMULATOR=1)."""
    entry = kernel_side_table.get_kernel(kernel_idx)
    if not Settings.from_env().simulator:
        name = entry.key.split("#")[0]
        raise SimulatorOffError(f"nki_kernel_wrapper: kernel {name} was dispatched to CPU but the "
                                f"NKI simulator is off; set NKI_SIMULATOR=1 (or route the op to its "
                                f"torch fallback when can_run_kernel() is False)")
    out = simulate_nki_kernel(entry.func, _lnc(grid), _named(args, arg_names, constant_args_key))
    check_result(entry.key, out)
    return tuple(out) if isinstance(out, list) else out


@nki_kernel_wrapper.py_impl(DispatchKey.Meta)
def nki_kernel_wrapper_meta(*, kernel_idx, grid, backend_config, operand_output_aliases, args,
                            arg_names, constant_args_key):
    """Meta tensors: outputs from the kernel's Layout, on the meta device (every tensor argument
    must be meta: a mix with CPU tensors raises RuntimeError, as torch does)."""
    named = _named(args, arg_names, constant_args_key)
    _check_devices(named)
    layout = _layout(kernel_idx, grid, named)
    return _assemble(layout, named, _new_outputs(layout, torch.device("meta")))


@nki_kernel_wrapper.py_impl(FakeTensorMode)
def nki_kernel_wrapper_fake(mode, *, kernel_idx, grid, backend_config, operand_output_aliases, args,
                            arg_names, constant_args_key):
    """Fake tensors: outputs from the kernel's Layout; aliased outputs are the inputs themselves."""
    named = _named(args, arg_names, constant_args_key)
    layout = _layout(kernel_idx, grid, named)
    with mode:
        return _assemble(layout, named, _new_outputs(layout, _out_device(named)))


@nki_kernel_wrapper.py_impl(ProxyTorchDispatchMode)
def nki_kernel_wrapper_proxy(mode, *, kernel_idx, grid, backend_config, operand_output_aliases, args,
                             arg_names, constant_args_key):
    """make_fx: one call_function node; aliased outputs keep the inputs' proxies."""
    node_args = dict(kernel_idx=kernel_idx, grid=grid, backend_config=backend_config,
                     operand_output_aliases=operand_output_aliases, args=args, arg_names=arg_names,
                     constant_args_key=constant_args_key)
    inputs = {id(a) for a in args if isinstance(a, torch.Tensor)}
    return _trace(mode, nki_kernel_wrapper, node_args,
                  lambda out: pytree.tree_map_only(torch.Tensor,
                                                   lambda t: None if id(t) in inputs else t, out))


@nki_kernel_wrapper.py_functionalize_impl
def nki_kernel_wrapper_functionalize(ctx, *, kernel_idx, grid, backend_config, operand_output_aliases,
                                     args, arg_names, constant_args_key):
    """Mutating -> functional HOP: constants leave the graph (side table), written inputs are
    replaced by the functional HOP's clones, aliased outputs are returned as the inputs."""
    _register_inductor_fallback()
    wrapped = _named(args, arg_names, constant_args_key)
    unwrapped = dict(zip(wrapped, ctx.unwrap_tensors(list(wrapped.values()))))
    tensor_names = tuple(n for n, v in unwrapped.items() if isinstance(v, torch.Tensor))
    const_key = kernel_side_table.add_constant_args(
        {n: v for n, v in unwrapped.items() if n not in tensor_names})
    with ctx.redispatch_to_next():
        layout = _layout(kernel_idx, grid, unwrapped)
        to_clone = _with_aliases(wrapped, tensor_names, layout.written)
        _check_alias_views(wrapped, unwrapped, to_clone)
        aliases = {tensor_names.index(o.alias): i for i, o in enumerate(layout.outs) if o.alias}
        flat = nki_kernel_wrapper_functional(
            kernel_idx=kernel_idx, grid=grid, backend_config=backend_config,
            operand_output_aliases=aliases, args=tuple(unwrapped[n] for n in tensor_names),
            arg_names=tensor_names, constant_args_key=const_key, tensors_to_clone=to_clone)
    n_new = len(flat) - len(to_clone)
    for name, clone in zip(to_clone, flat[n_new:]):
        ctx.replace(wrapped[name], clone)
        ctx.mark_mutation_hidden_from_autograd(wrapped[name])
        ctx.commit_update(wrapped[name])
        ctx.sync(wrapped[name])
    return _assemble(layout, wrapped, ctx.wrap_tensors(tuple(flat[:n_new])))

###############################################################################
# nki_kernel_wrapper_functional


@nki_kernel_wrapper_functional.py_impl(DispatchKey.CPU)
def nki_kernel_wrapper_functional_cpu(*, kernel_idx, grid, backend_config, operand_output_aliases,
                                      args, arg_names, constant_args_key, tensors_to_clone):
    """Clone the written inputs, run the mutating HOP on them, return (new outputs, clones)."""
    named = dict(zip(arg_names, args))
    clones = _clones([named[n] for n in tensors_to_clone])
    named.update(zip(tensors_to_clone, clones))
    out = nki_kernel_wrapper(kernel_idx=kernel_idx, grid=grid, backend_config=backend_config,
                             operand_output_aliases=operand_output_aliases, args=tuple(named.values()),
                             arg_names=tuple(named), constant_args_key=constant_args_key)
    items = () if out is None else out if isinstance(out, (tuple, list)) else (out,)
    passed = {id(v) for v in named.values()}
    return tuple(t for t in items if id(t) not in passed) + tuple(clones)


def _functional_empty(kernel_idx, grid, args, arg_names, constant_args_key, tensors_to_clone, device):
    named = _named(args, arg_names, constant_args_key)
    if device.type == "meta":
        _check_devices(named)
    layout = _layout(kernel_idx, grid, named)
    return tuple(_new_outputs(layout, device)) + tuple(_clones([named[n] for n in tensors_to_clone]))


@nki_kernel_wrapper_functional.py_impl(DispatchKey.Meta)
def nki_kernel_wrapper_functional_meta(*, kernel_idx, grid, backend_config, operand_output_aliases,
                                       args, arg_names, constant_args_key, tensors_to_clone):
    return _functional_empty(kernel_idx, grid, args, arg_names, constant_args_key, tensors_to_clone,
                             torch.device("meta"))


@nki_kernel_wrapper_functional.py_impl(FakeTensorMode)
def nki_kernel_wrapper_functional_fake(mode, *, kernel_idx, grid, backend_config,
                                       operand_output_aliases, args, arg_names, constant_args_key,
                                       tensors_to_clone):
    with mode:
        return _functional_empty(kernel_idx, grid, args, arg_names, constant_args_key, tensors_to_clone,
                                 _out_device(dict(zip(arg_names, args))))


@nki_kernel_wrapper_functional.py_impl(ProxyTorchDispatchMode)
def nki_kernel_wrapper_functional_proxy(mode, *, kernel_idx, grid, backend_config,
                                        operand_output_aliases, args, arg_names, constant_args_key,
                                        tensors_to_clone):
    return _trace(mode, nki_kernel_wrapper_functional, dict(
        kernel_idx=kernel_idx, grid=grid, backend_config=backend_config,
        operand_output_aliases=operand_output_aliases, args=args, arg_names=arg_names,
        constant_args_key=constant_args_key, tensors_to_clone=tensors_to_clone))


@nki_kernel_wrapper_functional.py_functionalize_impl
def nki_kernel_wrapper_functional_functionalize(ctx, *, kernel_idx, grid, backend_config,
                                                operand_output_aliases, args, arg_names,
                                                constant_args_key, tensors_to_clone):
    unwrapped = ctx.unwrap_tensors(args)
    with ctx.redispatch_to_next():
        out = nki_kernel_wrapper_functional(
            kernel_idx=kernel_idx, grid=grid, backend_config=backend_config,
            operand_output_aliases=operand_output_aliases, args=unwrapped, arg_names=arg_names,
            constant_args_key=constant_args_key, tensors_to_clone=tensors_to_clone)
        return ctx.wrap_tensors(out)

###############################################################################
# Fallthroughs and graph registration

_FALLTHROUGH = (DispatchKey.PythonDispatcher, DispatchKey.PythonTLSSnapshot, DispatchKey.ADInplaceOrView,
                DispatchKey.BackendSelect, DispatchKey.AutocastCPU)
for _hop in (nki_kernel_wrapper, nki_kernel_wrapper_functional):
    for _key in _FALLTHROUGH:
        _hop.fallthrough(_key)
    _hop.py_autograd_impl(_refuse_grad)     # below autograd when nothing requires grad

torch._dynamo.allow_in_graph(nki_kernel_wrapper)
torch.fx.node.has_side_effect(nki_kernel_wrapper)     # make_fx graphs must not drop a writing call

__all__ = ["nki_kernel_wrapper", "nki_kernel_wrapper_functional", "NKIKernelWrapper",
           "NKIKernelWrapperFunctional"]
