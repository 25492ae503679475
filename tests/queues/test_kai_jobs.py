"""Jobs for KAI Scheduler teams: a fraction is one its own formatting keeps."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from gpupools.cli.main import app
from gpupools.queues import kai
from gpupools.validation.stack import validate_stack

from conftest import config_problems, stack_config


# --------------------------------------------------------------------------------------------------------------------
# A fraction survives its own formatting


def fraction_stack(fraction: float) -> dict:
    return stack_config("aws", pools=[{"name": "share", "instanceType": "g6.xlarge", "maxNodes": 2, "sharing": {"mode": "none", "fraction": fraction}}],
                        quotas="kai", teams=[{"name": "ml", "gpus": 1}])


@pytest.mark.parametrize("fraction, written", [(4e-7, "0.0"), (0.9999999, "1.0"), (1e-9, "0.0")])
def test_a_fraction_written_as_zero_or_one_is_refused_naming_the_field(fraction, written):
    problems = [str(p) for p in config_problems(fraction_stack(fraction))]
    assert problems == [f"error: pools[0].sharing.fraction: {fraction!r} is written \"{written}\" in gpu-fraction (six decimals), which KAI "
                        f"refuses: give a fraction from 0.000001 to 0.999999"]


def test_a_fraction_rounded_by_its_formatting_is_refused_and_one_it_keeps_is_taken():
    problems = [str(p) for p in config_problems(fraction_stack(0.1234567))]
    assert problems == ["error: pools[0].sharing.fraction: 0.1234567 is written \"0.123457\" in gpu-fraction (six decimals); give it with "
                        "at most six decimals"]
    for fraction, written in ((0.000001, "0.000001"), (0.999999, "0.999999"), (0.25, "0.25"), (0.5, "0.5")):
        stack = validate_stack(fraction_stack(fraction))
        assert kai.fraction_text(stack.pools[0].sharing.fraction) == written


def test_a_default_sharing_fraction_is_refused_once():
    config = fraction_stack(0.25)
    config["gpupools:sharing"] = {"mode": "none", "fraction": 4e-7}
    config["gpupools:pools"] = [{"name": n, "instanceType": "g6.xlarge", "maxNodes": 2} for n in ("a", "b")]
    problems = [str(p) for p in config_problems(config)]
    assert problems == ["error: sharing.fraction: 4e-07 is written \"0.0\" in gpu-fraction (six decimals), which KAI refuses: give a "
                        "fraction from 0.000001 to 0.999999"]


def test_workload_refuses_a_fraction_it_would_print_as_zero(stack_file):
    path = str(stack_file(fraction_stack(0.25)))
    result = CliRunner().invoke(app, ["workload", "--config", path, "--team", "ml", "--pool", "share", "--fraction", "0.0000001"])
    assert result.exit_code == 2
    assert result.output == ("error: --fraction: 1e-07 is written \"0.0\" in gpu-fraction (six decimals), which KAI refuses: give a "
                             "fraction from 0.000001 to 0.999999\n")
    ok = CliRunner().invoke(app, ["workload", "--config", path, "--team", "ml", "--pool", "share", "--fraction", "0.000001"])
    assert ok.exit_code == 0 and "gpu-fraction: '0.000001'" in ok.output
