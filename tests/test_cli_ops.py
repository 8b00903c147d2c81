"""``nkisim ops``: every documented ``nki.isa`` and ``nki.language`` name is listed with its status
and generations, worked out from the code; the README's table is ``nkisim ops --markdown``."""
import pathlib

from nkisim import ops_table
from nkisim.cli import main as cli_main
from nkisim.errors import UnsupportedError

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"

# The module-level names of aws-neuron-sdk nki/api/nki/isa/__init__.py (release 2.32): functions,
# classes and the engine constants.
DOC_ISA = """tensor_engine vector_engine scalar_engine gpsimd_engine unknown_engine engine reduce_cmd
dge_mode oob_mode matmul_perf_mode nc_version dma_engine NkiInstruction NkiValidationError
VirtualRegister get_nc_sub_version get_nc_version dma_copy tensor_copy memset tensor_copy_predicated
nc_matmul nc_matmul_mx nc_transpose dma_transpose tensor_tensor tensor_scalar tensor_reduce
tensor_partition_reduce tensor_scalar_cumulative activation activation_reduce activate2 iota
affine_select local_gather nc_n_gather bn_stats bn_aggr tensor_tensor_scan nc_stream_shuffle rng
dropout set_rng_seed rand_set_state rand_get_state rand2 exponential reciprocal max8 sequence_bounds
scalar_tensor_tensor tensor_scalar_reduce core_barrier dma_compute quantize_mx range_select
select_reduce sendrecv register_alloc register_move register_load register_store nc_find_index8
nc_match_replace8 nonzero_with_count topk""".split()

# The same for nki/api/nki/language/__init__.py, less ``DType`` (``DType = str``, a typing alias
# of the docs' stub) and the private ``_TileSize``.
DOC_NL = """bool_ int8 int16 int32 uint8 uint16 uint32 float16 float32 bfloat16 tfloat32 float8_e4m3
float8_e4m3fn float8_e5m2 float8_e5m2_x4 float8_e4m3fn_x4 float8_e8m0fnu float4_e2m1fn_x4 sbuf psum
hbm private_hbm shared_hbm tile_size average prelu bypass MemoryRegion NKIObject NkiTensor is_hbm
is_on_chip is_psum is_sbuf add subtract multiply divide maximum minimum abs_max abs_min abs square
power equal not_equal less less_equal greater greater_equal bitwise_and bitwise_or bitwise_xor invert
left_shift right_shift logical_and logical_or logical_xor logical_not exp log sqrt rsqrt tanh sigmoid
relu gelu gelu_apprx_sigmoid gelu_apprx_tanh gelu_dx gelu_apprx_sigmoid_dx silu silu_dx softplus mish
erf erf_dx reciprocal copy sin cos tan arctan ceil floor trunc negative sign fmod mod sum max min mean
prod var all softmax rms_norm where dropout ones full zeros_like empty_like random_seed expand_dims
broadcast_to transpose matmul no_reorder load_transpose2d gather_flattened ds affine_range
sequential_range static_range dynamic_range fori_loop while_loop ndarray zeros load store program_id
num_programs program_ndim shared_constant shared_identity_matrix device_print rand""".split()

# "Available only on NeuronCore-vN and newer" / "Supported arch versions: NeuronCore-vN+" in the
# same docs, as the first generation (NeuronCore-v2 trn1, v3 trn2, v4 trn3); every other
# instruction: all three.
DOC_FIRST_GENERATION = {"nc_matmul_mx": "trn3", "activate2": "trn3", "rand2": "trn3",
                        "exponential": "trn3", "quantize_mx": "trn3", "rand_set_state": "trn2",
                        "rand_get_state": "trn2", "core_barrier": "trn2", "range_select": "trn2",
                        "sendrecv": "trn2", "nonzero_with_count": "trn2"}
GENERATIONS = ("trn1", "trn2", "trn3")


def _by_api():
    return {r.api: r for r in ops_table.rows()}


def test_every_documented_name_is_listed():
    listed = _by_api()
    assert {f"nisa.{n}" for n in DOC_ISA} - set(listed) == set()
    assert {f"nl.{n}" for n in DOC_NL} - set(listed) == set()
    assert all(r.status in ops_table.STATUSES for r in listed.values())


def test_every_documented_instruction_is_an_instruction_on_its_generations():
    rows = _by_api()
    instructions = {n for n in DOC_ISA if rows[f"nisa.{n}"].kind == "instruction"}
    # the documented names that issue no instruction
    assert set(DOC_ISA) - instructions == {
        "tensor_engine", "vector_engine", "scalar_engine", "gpsimd_engine", "unknown_engine", "engine",
        "reduce_cmd", "dge_mode", "oob_mode", "matmul_perf_mode", "nc_version", "dma_engine",
        "NkiInstruction", "NkiValidationError", "VirtualRegister", "get_nc_sub_version", "get_nc_version",
        "register_alloc"}
    for n in instructions:
        first = DOC_FIRST_GENERATION.get(n, "trn1")
        assert rows[f"nisa.{n}"].generations == GENERATIONS[GENERATIONS.index(first):], n


def test_tokens_valid_where_the_alu_has_them():
    rows = _by_api()
    assert rows["nl.abs_max"].generations == ("trn3",)         # "NeuronCore-v4 and newer"
    assert rows["nl.add"].generations == GENERATIONS


def test_stubs_are_what_is_not_fully_simulated():
    stubs = {r.api: r for r in ops_table.rows(stubs_only=True)}
    assert set(stubs) == {r.api for r in ops_table.rows() if r.status != "simulated"}
    custom = stubs["nisa.builtin_custom_op"]
    assert custom.status == "not yet" and "custom GpSimd library" in custom.note
    assert stubs["nl.prelu"].status == "partly"                  # nisa.activation cannot take it
    assert "nisa.tensor_tensor" not in stubs


def _helper(feature):
    raise UnsupportedError(f"{feature}", "is not simulated yet")


def _stub(x):
    """A stub."""
    _helper("nl.thing")


def _named_helper(feature):
    raise UnsupportedError("nl", f"{feature} is not simulated yet")


def _stub_named():
    _named_helper("nl.thing")


def _real(x):
    if x:
        raise UnsupportedError("nl.real", "mode=2 is not simulated")
    return x


def test_a_function_that_only_raises_is_not_yet():
    stub, real = _stub, _real
    assert ops_table._stub_reason(stub) == "is not simulated yet"
    assert ops_table._stub_reason(_stub_named) == "nl.thing is not simulated yet"
    assert ops_table._stub_reason(real) is None
    assert ops_table._gaps(real) == ["mode=2 is not simulated"]


def test_generation_probe_reads_the_rules():
    from nkisim import arch

    class Spec:
        api = "nisa.fake"
        import inspect as _i
        signature = _i.signature(lambda dst, engine=None: None)

        @staticmethod
        def rules(ins, dst, engine):
            if ins.target.nc_version < 3:
                raise UnsupportedError(ins.op, f"needs trn2 or newer, not {ins.target.name}")
            dst.shape                       # a placeholder: past the gate

    targets = sorted(arch.TARGETS.values(), key=lambda t: t.nc_version)
    assert ops_table._valid_on(Spec, targets) == ("trn2", "trn3")


def test_cli_prints_one_line_per_name(capsys):
    assert cli_main(["ops"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(ops_table.rows())
    row = next(ln for ln in lines if ln.startswith("nisa.tensor_tensor "))
    assert row.split() == ["nisa.tensor_tensor", "instruction", "elementwise", "simulated", "all"]
    row = next(ln for ln in lines if ln.startswith("nisa.activate2 "))
    assert row.split() == ["nisa.activate2", "instruction", "activation", "simulated", "trn3"]
    assert cli_main(["ops", "--stubs"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(ops_table.rows(stubs_only=True))


def _readme_table() -> list:
    lines = README.read_text().splitlines()
    start = lines.index("| name | kind | status | generations | note |")
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return lines[start:end]


def test_readme_ops_table_is_nkisim_ops_markdown(capsys):
    assert cli_main(["ops", "--markdown"]) == 0
    want = capsys.readouterr().out.rstrip("\n").splitlines()
    assert _readme_table() == want, "README.md's ops table is stale: paste `nkisim ops --markdown`"


# ---- notes: every f-string hole rendered, none shown as ``{...}`` ------------------------------

def test_no_note_shows_an_unformatted_placeholder(capsys):
    import re
    hole = re.compile(r"[{}]")
    for argv in (["ops"], ["ops", "--markdown"], ["ops", "--stubs"], ["ops", "--stubs", "--markdown"]):
        assert cli_main(argv) == 0
        out = capsys.readouterr().out
        bad = [ln for ln in out.splitlines() if hole.search(ln)]
        assert not bad, f"nkisim {' '.join(argv)}: notes with a placeholder: {bad}"
    assert all("{" not in r.note and "}" not in r.note for r in ops_table.rows())


def test_the_mx_notes_name_the_operands_the_check_covers():
    """The MX ops refuse an indirect view of any of their tensor operands (the documented
    parameters dst, stationary, moving, stationary_scale, moving_scale / dst, src, dst_scale)."""
    rows = _by_api()
    assert rows["nisa.nc_matmul_mx"].note == ("dst, stationary, moving, stationary_scale or moving_scale is an "
                                              "indirect view; tensor indirection of MX operands is not simulated")
    assert rows["nisa.quantize_mx"].note == ("dst, src or dst_scale is an indirect view; tensor indirection of MX "
                                             "operands is not simulated")


def _each_operand(op, **operands):
    for nm, x in operands.items():
        if x:
            raise UnsupportedError(op, f"{nm} of {op} is not simulated on {x.target.name}")


def _uses_each(a, b):
    _each_operand("nisa.fake", first=a, second=b)


def _one_operand(a):
    _each_operand("nisa.fake", only=a)


def _unknown_hole(x):
    if x:
        raise UnsupportedError("nl.real", f"mode {x.mode} with {x.zz} is not simulated")


def test_holes_take_the_call_sites_values_or_a_plain_word():
    assert ops_table._gaps(_uses_each) == ["first or second of nisa.fake is not simulated on the target"]
    assert ops_table._gaps(_one_operand) == ["only of nisa.fake is not simulated on the target"]
    assert ops_table._gaps(_unknown_hole) == ["mode the mode with a value is not simulated"]
    assert ops_table._gaps(_each_operand) == ["an operand of the op is not simulated on the target"]
