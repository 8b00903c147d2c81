"""``nki.collectives``: collective instructions between the ranks of a multi-rank launch.

Every op is an ``@instruction`` spec (events with engine ``dma`` and the tensor operands; the
rank and the rank-list in the options). Rules read only the arguments (memory spaces, shapes,
dtypes, enums, the target); what depends on the launch — the number of ranks, this rank's
rank-list, the other ranks' operands, metadata values — is checked in compute, which meets the
other ranks at the launch's ``runtime.ranks.World``. Source: aws-neuron-sdk
nki/api/nki/collectives/__init__.py (quoted in each op's docstring), nki/api/nki.collectives.rst.
One module per kind (common: ReplicaGroup and the exchange; dense; variable; ring). Imports isa
(dispatch, alu, registers), memory, runtime.ranks; the API layer, like isa.

Decisions common to every op (the docs are silent):
- a collective moves elements: each src and its dst have one dtype (else DtypeError); reductions
  (``op`` ``nl.add``/``nl.minimum``/``nl.maximum``) run in float32 (integers exactly, in int64)
  in rank-list order, rounded once into dst's dtype;
- shapes, dtypes and parameters of one collective must agree on every rank of the rank-list; a
  rank issuing another collective (or other shapes) at the same point raises DeadlockError
  naming both ranks and lines (on hardware the ranks would wait for each other forever);
- under LNC2 both cores of every rank issue the collective (it is an instruction of the logical
  core); SBUF operands are each core's own (core c meets core c of every other rank), shared-HBM
  operands passed identically by both cores move once;
- a launch without ``ranks=`` is a world of one rank (rank 0).
"""
from .common import ReplicaGroup
from .dense import all_gather, all_reduce, all_to_all, reduce_scatter
from .ring import (collective_permute, collective_permute_implicit,
                   collective_permute_implicit_current_processing_rank_id, collective_permute_implicit_reduce,
                   rank_id)
from .variable import all_gather_v, all_to_all_v

__all__ = ["ReplicaGroup", "all_reduce", "all_gather", "all_gather_v", "reduce_scatter", "all_to_all",
           "all_to_all_v", "collective_permute", "collective_permute_implicit",
           "collective_permute_implicit_reduce", "collective_permute_implicit_current_processing_rank_id",
           "rank_id"]
