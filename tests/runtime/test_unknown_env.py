"""An ``NKISIM_*`` environment variable that is no setting is warned about once (a misspelt knob
is otherwise silently ignored), naming the closest setting's variable; nkisim's own non-setting
variable (``NKISIM_RESULTS``) and the settings' variables are not (``config._warn_unknown``)."""
import warnings

import pytest

from nkisim import config


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.setattr(config, "_WARNED", set())
    monkeypatch.setattr(config, "_FROM_ENV", {})


def test_a_misspelt_knob_is_warned_once_with_the_closest_name(monkeypatch):
    monkeypatch.setenv("NKISIM_PRECISE_FP", "maybe")
    with pytest.warns(UserWarning, match=r"^NKISIM_PRECISE_FP is not an nkisim setting and is ignored; "
                                         r"did you mean NKI_PRECISE_FP\?"):
        config.Settings.from_env()
    config._FROM_ENV.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config.Settings.from_env()                    # once per process per name


def test_known_variables_give_no_warning(monkeypatch):
    monkeypatch.setenv("NKISIM_SEED", "3")
    monkeypatch.setenv("NKISIM_RESULTS", "/tmp/x.jsonl")
    monkeypatch.setenv("NKI_PRECISE_FP", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = config.Settings.from_env()
    assert s.seed == 3


def test_an_unlike_name_is_warned_without_a_guess(monkeypatch):
    monkeypatch.setenv("NKISIM_ZZZZZZZZZZZZZZZZZZZZ", "1")
    with pytest.warns(UserWarning) as got:
        config.Settings.from_env()
    assert [str(w.message) for w in got if "ZZZ" in str(w.message)] == [
        "NKISIM_ZZZZZZZZZZZZZZZZZZZZ is not an nkisim setting and is ignored (the settings: "
        "README's settings table, nkisim.config.KNOBS)"]
