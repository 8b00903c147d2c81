"""The one settings table (config.KNOBS): README's table matches it, every knob is parsed by the
same rules (whitespace stripped, empty = unset, a bad value raises naming the variable), and
nki.simulate takes exactly its options."""
import dataclasses
import pathlib

import numpy as np
import pytest

import nkisim.nki as nki
from nkisim.config import KNOBS, SIMULATE_OPTIONS, Settings, settings_table_markdown

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
ENV_KNOBS = [k for k in KNOBS if k.env]


def _readme_table() -> list[str]:
    lines = README.read_text().splitlines()
    start = lines.index("| setting | meaning |")
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return lines[start:end]


def test_readme_settings_table_is_the_knob_table():
    want = settings_table_markdown().splitlines()
    got = _readme_table()
    missing = [row for row in want if row not in got]
    extra = [row for row in got if row not in want]
    assert not missing and not extra, (
        "README.md's settings table differs from nkisim.config.KNOBS; rows to add or fix:\n"
        + "\n".join(missing) + "\nrows to remove:\n" + "\n".join(extra)
        + "\n(paste nkisim.config.settings_table_markdown())")
    assert got == want                                          # same order too


def test_every_variable_in_the_readme_table_is_a_knob():
    table = "\n".join(_readme_table())
    for k in KNOBS:
        for var in k.env:
            assert f"`{var}`" in table
    assert "`NKISIM_FAST_PATHS`, `fast_paths=`" in table


def test_each_settings_field_is_one_row():
    assert [k.field for k in KNOBS] == [f.name for f in dataclasses.fields(Settings)]
    variables = [v for k in KNOBS for v in k.env]
    assert len(variables) == len(set(variables))
    assert all(k.parse is not None for k in ENV_KNOBS)
    assert all(k.doc and "|" not in k.doc and "\n" not in k.doc for k in KNOBS)
    assert Settings() == Settings(**{k.field: k.default for k in KNOBS})
    assert {k.field for k in KNOBS if k.layer == "torch"} == {"cpu_mode", "disable_kernels"}


def test_nothing_set_gives_the_defaults():
    assert Settings.from_env({}) == Settings()


@pytest.mark.parametrize("knob", ENV_KNOBS, ids=lambda k: k.env[0])
def test_blank_values_count_as_unset(knob):
    assert Settings.from_env({v: "  " for v in knob.env}) == Settings()


@pytest.mark.parametrize("knob", ENV_KNOBS, ids=lambda k: k.env[0])
def test_a_bad_value_raises_naming_the_variable(knob):
    with pytest.raises(ValueError, match=rf"^{knob.env[0]}: (expected|unknown target) .*'bogus'"):
        Settings.from_env({knob.env[0]: " bogus "})


@pytest.mark.parametrize("var, value, field, want", [
    ("NKI_SIMULATOR", " 1 ", "simulator", True),
    ("NKI_PRECISE_FP", " Off", "precise_fp", False),
    ("NEURON_PLATFORM_TARGET_OVERRIDE", " GEN3 ", "target", "trn2"),
    ("NKI_NC_VERSION", "gen2", "target", "trn1"),
    ("NKISIM_STRICT_UNINIT", "yes", "uninitialized_reads", "raise"),
    ("NKISIM_DETECT_RACES", "1", "detect_races", True),
    ("NKISIM_SHUFFLE", "true", "iteration_order", "shuffled"),
    ("NKISIM_SEED", " 7", "seed", 7),
    ("NKISIM_FINDINGS", "ALL ", "findings", "all"),
    ("NKISIM_FAST_PATHS", "0", "fast_paths", False),
    ("VLLM_NEURON_CPU_MODE", "2", "cpu_mode", True),
    ("VLLM_NEURON_DISABLE_NKI_KERNELS", " 0", "disable_kernels", False),
])
def test_each_variable_is_parsed(var, value, field, want):
    assert getattr(Settings.from_env({var: value}), field) == want


def test_a_bad_second_variable_is_named_too():
    with pytest.raises(ValueError, match=r"^NKI_NC_VERSION: unknown target 'gen9'; expected one of "):
        Settings.from_env({"NKI_NC_VERSION": "gen9"})


def test_the_override_variable_wins_over_nki_nc_version():
    env = {"NEURON_PLATFORM_TARGET_OVERRIDE": "trn3", "NKI_NC_VERSION": "gen2"}
    assert Settings.from_env(env).target == "trn3"


@pytest.mark.parametrize("value", ["-1", "1.5", "x"])
def test_seed_must_be_a_non_negative_integer(value):
    with pytest.raises(ValueError, match=rf"^NKISIM_SEED: expected a non-negative integer, got '{value}'$"):
        Settings.from_env({"NKISIM_SEED": value})


def test_an_option_given_is_not_read_from_the_environment():
    env = {"NKI_PRECISE_FP": "bogus", "NEURON_PLATFORM_TARGET_OVERRIDE": "trn9"}
    s = Settings.from_env(env, precise_fp=False, target="trn2")
    assert (s.precise_fp, s.target) == (False, "trn2")
    with pytest.raises(ValueError, match=r"^NKI_PRECISE_FP: "):
        Settings.from_env(env, precise_fp=None, target="trn2")      # None: not given


def test_simulate_takes_exactly_the_table_options():
    assert SIMULATE_OPTIONS == tuple(k.field for k in KNOBS if k.option)
    assert "fast_paths" in SIMULATE_OPTIONS and "simulator" not in SIMULATE_OPTIONS
    seen = []

    def kernel(x):
        from nkisim import state
        seen.append(state.current.get().settings.fast_paths)
        return x
    nki.simulate(kernel, fast_paths=False)(np.zeros((1, 1), np.float32))
    assert seen == [False]
    with pytest.raises(TypeError, match=r"^nki\.simulate: unknown option\(s\) \['cpu_mode'\]; expected "
                                        + r"\[" + ", ".join(f"'{o}'" for o in SIMULATE_OPTIONS) + r"\]$"):
        nki.simulate(kernel, cpu_mode=True)


def test_from_env_reuses_settings_until_the_environment_changes(monkeypatch):
    from nkisim.config import Settings
    monkeypatch.setenv("NKISIM_SEED", "3")
    a = Settings.from_env()
    assert Settings.from_env() is a and a.seed == 3
    monkeypatch.setenv("NKISIM_SEED", "4")
    b = Settings.from_env()
    assert b.seed == 4 and b is not a
    assert Settings.from_env(seed=9).seed == 9 and Settings.from_env().seed == 4
    monkeypatch.setenv("NKISIM_SEED", "-1")
    with pytest.raises(ValueError, match="NKISIM_SEED"):
        Settings.from_env()


@pytest.mark.parametrize("given, want", [("no", False), ("Off", False), (" yes ", True), (0, False),
                                         (1, True), (True, True), (False, False)])
def test_flag_options_parse_like_the_environment(given, want):
    from nkisim.config import Settings
    s = Settings.from_env(detect_races=given, fast_paths=given, precise_fp=given)
    assert (s.detect_races, s.fast_paths, s.precise_fp) == (want, want, want)


FLAG_TEXT = "expected 1/0, true/false, yes/no or on/off (any case)"   # every accepted form, once


@pytest.mark.parametrize("bad", ["maybe", 2, [1], 0.5])
def test_a_flag_option_that_is_no_flag_raises(bad):
    """One text for every bad flag, a Python value or a string alike."""
    from nkisim.config import Settings
    with pytest.raises(ValueError) as err:
        Settings.from_env(detect_races=bad)
    assert str(err.value) == f"detect_races: {FLAG_TEXT}, got {bad!r}"


def test_a_bad_flag_in_the_environment_has_the_same_text(monkeypatch):
    monkeypatch.setenv("NKI_PRECISE_FP", "maybe")
    with pytest.raises(ValueError) as err:
        Settings.from_env()
    assert str(err.value) == f"NKI_PRECISE_FP: {FLAG_TEXT}, got 'maybe'"


@pytest.mark.parametrize("given, want", [(v, True) for v in ("1", "true", "TRUE", "yes", "On")]
                         + [(v, False) for v in ("0", "false", "False", "NO", "off")])
def test_every_form_the_flag_text_names_is_accepted(given, want, monkeypatch):
    assert Settings.from_env(precise_fp=given).precise_fp is want
    monkeypatch.setenv("NKI_PRECISE_FP", given)
    assert Settings.from_env().precise_fp is want


def test_choice_options_are_case_insensitive_like_the_environment():
    from nkisim.config import Settings
    assert Settings.from_env(findings="All").findings == "all"
    assert Settings.from_env(uninitialized_reads=" RAISE").uninitialized_reads == "raise"


@pytest.mark.parametrize("bad", [dict(max_loop_iterations=True), dict(barrier_timeout_s="5"),
                                 dict(seed=1.5), dict(seed=True)])
def test_numeric_options_refuse_bools_and_strings(bad):
    from nkisim.config import Settings
    with pytest.raises(ValueError, match=f"Settings.{next(iter(bad))} must be"):
        Settings.from_env(**bad)
