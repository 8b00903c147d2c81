"""How the kernels split work between the cores of an LNC2 launch."""
import nkisim.nki.language as nl


def core_share(n: int) -> tuple[int, int]:
    """(start, count) of this core's contiguous share of ``n`` items: ceil(n / cores) per core,
    the last core's share cut at ``n`` (``count`` may be 0). Plain and LNC1 launches get all."""
    per_core = -(-n // nl.num_programs(0))
    start = nl.program_id(0) * per_core
    return start, max(0, min(per_core, n - start))
