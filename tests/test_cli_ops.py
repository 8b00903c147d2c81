"""``nkisim ops``: every documented ``nki.isa`` instruction is listed, and which are not simulated."""
from nkisim.cli import main as cli_main, ops_table

# The current API's instructions: the functions of aws-neuron-sdk nki/api/nki/isa/__init__.py
# (release 2.32), less the three that issue no instruction (get_nc_version, get_nc_sub_version,
# register_alloc).
DOCUMENTED = """activate2 activation activation_reduce affine_select bn_aggr bn_stats core_barrier
dma_compute dma_copy dma_transpose dropout exponential iota local_gather max8 memset nc_find_index8
nc_match_replace8 nc_matmul nc_matmul_mx nc_n_gather nc_stream_shuffle nc_transpose nonzero_with_count
quantize_mx rand2 rand_get_state rand_set_state range_select reciprocal register_load register_move
register_store rng scalar_tensor_tensor select_reduce sendrecv sequence_bounds set_rng_seed tensor_copy
tensor_copy_predicated tensor_partition_reduce tensor_reduce tensor_scalar tensor_scalar_cumulative
tensor_scalar_reduce tensor_tensor tensor_tensor_scan topk""".split()

# What nkisim does not simulate: builtin_custom_op alone (it runs a custom GpSimd library; Beta 1
# API page only).
NOT_SIMULATED = {"builtin_custom_op"}


def test_every_documented_instruction_is_listed():
    listed = {row[0].removeprefix("nisa.") for row in ops_table()}
    assert set(DOCUMENTED) - listed == set()


def test_the_stub_list_is_exactly_what_is_not_simulated():
    stubs = {row[0].removeprefix("nisa.") for row in ops_table(stubs_only=True)}
    assert stubs == NOT_SIMULATED
    assert all(row[-1].startswith("not simulated") for row in ops_table(stubs_only=True))


def test_cli_prints_one_line_per_instruction(capsys):
    assert cli_main(["ops"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(ops_table())
    row = next(ln for ln in lines if ln.startswith("nisa.tensor_tensor "))
    assert row.split() == ["nisa.tensor_tensor", "elementwise", "data1,data2", "dst", "simulated"]
