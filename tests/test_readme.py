"""README.md holds as printed: its Python snippets run, in order, in one fresh interpreter with no
nkisim variable in the environment; its `nkisim ops --stubs` listing is the command's output."""
import os
import pathlib
import re
import subprocess
import sys

import pytest

from nkisim import ops_table

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
# Variables the README's snippets must set themselves if they need them
OWN_VARIABLES = re.compile(r"^(NKI_|NKISIM_|NEURON_|VLLM_)")


def _blocks(lang: str) -> list:
    return re.findall(rf"^```{lang}\n(.*?)^```$", README, flags=re.S | re.M)


def test_readme_has_the_snippets_it_should():
    code = _blocks("python")
    assert len(code) >= 6
    joined = "\n".join(code)
    for needed in ("nki.simulate(add_kernel)", "wrap_nki(add_kernel)", "TinyLlama(", "nkisim.profile(",
                   "nki1.simulate_kernel(double_rows"):
        assert needed in joined


def test_every_python_snippet_runs_as_printed(tmp_path):
    pytest.importorskip("torch")          # the PyTorch and tiny-model snippets need the torch extra
    script = tmp_path / "readme_snippets.py"
    script.write_text("\n\n".join(f"# ---- snippet {i}\n{b}" for i, b in enumerate(_blocks("python"), 1)))
    env = {k: v for k, v in os.environ.items() if not OWN_VARIABLES.match(k)}
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    got = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=900)
    assert got.returncode == 0, got.stderr[-3000:]
    out = got.stdout
    assert "tensor([3., 3., 3., 3.])" in out                          # the PyTorch snippet's result
    assert re.search(r"\[\[\d+, \d+, \d+, \d+\], \[\d+, \d+, \d+, \d+\]\] True", out)   # tiny model
    assert (tmp_path / "k.json").exists()                             # the profile snippet's trace
    assert "Beta 1 matches NumPy: True" in out                        # the Beta-1 snippet


def test_not_simulated_listing_is_nkisim_ops_stubs():
    listing = next(b for b in _blocks("text") if "nisa.builtin_custom_op" in b)
    assert listing.rstrip("\n") == ops_table.text(ops_table.rows(stubs_only=True))


def test_install_notes_name_no_package_host():
    assert "://" not in README
    section = README[README.index("### Installing by hand"):README.index("## Use")]
    assert "numpy" in section.lower() and "ml_dtypes" in section
    assert "CPU-only wheel" in section and "Get Started" in section
