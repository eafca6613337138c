"""What each message about the experimental opt-in and the gate must say: its facts (which
API, which backend, which variable, what to do), never its exact wording.

``flashinfer/gating/messages.py`` builds every such message; the other tests build the text
they expect from those builders.  This is the one test to update when a message's facts
change, and the one that stays untouched when only its wording does.
"""

from __future__ import annotations

import os

import pytest

from flashinfer.gating import gate, messages
from flashinfer.gating.messages import (
    auto_feature_disabled,
    auto_refused_by_common_check,
    automatic_selection,
    every_candidate_rejected,
    experimental_api_banner,
    experimental_api_used,
    explicit_selection,
    gate_exclusion_reason,
    listed_in_restriction,
    only_experimental_fit,
    restriction_cannot_run,
    unrecognised_gate_value,
    unrecognised_value,
)

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"
KEY = "flashinfer.gemm.mm"  # an API's qualified name; users call it "mm"
REASONS = {"torch": "needs M > 64", "risky": "on CPU, needs TRITON_INTERPRET=1"}


def _names_each_reason(message: str, reasons: dict[str, str]) -> bool:
    return all(f"{b}: {r}" in message for b, r in reasons.items())


def test_the_messages_name_the_variable_the_gate_reads():
    assert messages.ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV == GATE
    assert gate.ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV == GATE  # the gate reads what they say


# ---- the warnings of an experimental backend that runs ------------------------------------


@pytest.mark.parametrize("build", [explicit_selection, automatic_selection])
def test_a_selection_warning_names_the_backend_and_the_api_users_call(build):
    message = build(KEY, "risky")
    # Starts with "Experimental": one -W message filter matches every experimental warning.
    assert message.startswith("Experimental")
    assert "'risky'" in message and "'mm'" in message
    assert "'flashinfer.gemm.mm'" not in message  # the plain name is quoted, not the key
    assert "deprecation" in message  # it may change or go without a deprecation period


def test_the_explicit_warning_shows_the_call_that_opted_in_and_needs_no_variable():
    message = explicit_selection(KEY, "risky")
    assert f"{KEY}(backend='risky')" in message
    assert GATE not in message


def test_the_automatic_warning_says_auto_picked_it_because_the_gate_is_on():
    message = automatic_selection(KEY, "risky")
    assert f"{KEY}(backend='auto')" in message
    assert f"{GATE}=1" in message
    assert message != explicit_selection(KEY, "risky")


@pytest.mark.parametrize("where", ["use_backends", "FLASHINFER_BACKENDS"])
def test_the_listed_warning_names_who_lists_the_backend_and_no_gate(where):
    message = listed_in_restriction(KEY, "risky", where)
    assert message.startswith("Experimental")
    assert "'risky'" in message and "'mm'" in message and where in message
    assert GATE not in message  # listing is an opt-in of its own
    assert message not in (explicit_selection(KEY, "risky"), automatic_selection(KEY, "risky"))


def test_the_experimental_api_warning_names_the_api_and_its_feature_when_it_differs():
    same = experimental_api_used("fused_thing", "fused_thing")
    assert same.startswith("Experimental") and "'fused_thing'" in same
    assert "deprecation" in same
    other = experimental_api_used("thing_feature", "Thing.run")
    assert "'Thing.run'" in other and "'thing_feature'" in other
    assert GATE not in same + other  # calling an experimental API needs no variable


def test_the_experimental_api_banner_names_the_feature_and_the_warning():
    banner = experimental_api_banner("thing_feature")
    assert banner.startswith("**Experimental API**")
    assert "thing_feature" in banner and "ExperimentalWarning" in banner
    assert GATE not in banner


# ---- automatic selection's verdicts and errors --------------------------------------------


def test_the_gate_exclusion_reason_names_the_variable():
    reason = gate_exclusion_reason()
    assert reason.startswith("experimental")
    assert GATE in reason and "\n" not in reason  # one line of a backend list


def test_only_experimental_fit_says_how_to_opt_in_both_ways_and_why_each_backend_failed():
    message = only_experimental_fit("mm", ["risky", "wide"], REASONS)
    assert "mm" in message and "'risky'" in message and "'wide'" in message
    assert "backend='risky'" in message  # the explicit opt-in, for this call
    assert f"{GATE}=1" in message  # the gate, for automatic selection
    assert _names_each_reason(message, REASONS)


def test_every_candidate_rejected_lists_each_reason_and_no_gate():
    message = every_candidate_rejected("mm", REASONS)
    assert "mm" in message and _names_each_reason(message, REASONS)
    assert GATE not in message


def test_a_common_check_refusal_of_auto_names_the_api_and_the_refusal():
    message = auto_refused_by_common_check("mm", "its common check returned False")
    assert "mm" in message and "its common check returned False" in message
    assert GATE not in message


@pytest.mark.parametrize("variable", [None, "FLASHINFER_BACKENDS"])
def test_a_restriction_that_cannot_run_names_it_its_backends_and_what_to_do(variable):
    message = restriction_cannot_run("mm", ["torch", "risky"], REASONS, variable)
    assert "mm" in message and "['torch', 'risky']" in message
    assert "use_backends" in message  # a block is the way around the variable, too
    assert variable is None or variable in message
    assert _names_each_reason(message, REASONS)
    assert "backend=" in message  # or name a backend explicitly
    assert GATE not in message  # listing is the opt-in here, not the gate


def test_the_errors_of_automatic_selection_share_one_headline_naming_the_api():
    """Upstream's callers recognise an automatic-selection failure by its first words."""
    errors = [
        only_experimental_fit("mm", ["risky"], REASONS),
        every_candidate_rejected("mm", REASONS),
        auto_refused_by_common_check("mm", "refused"),
        restriction_cannot_run("mm", ["torch"], REASONS, None),
    ]
    headline = os.path.commonprefix(errors)
    assert headline.rstrip().endswith("mm")


def test_a_hand_routed_feature_names_the_feature_and_the_gate_to_set():
    message = auto_feature_disabled("paged_decode")
    assert "'paged_decode'" in message and f"{GATE}=1" in message


# ---- a variable set to a value flashinfer does not know ----------------------------------


def test_an_unrecognised_value_names_the_variable_the_value_the_effect_and_the_choices():
    message = unrecognised_value("FLASHINFER_X", "yes", "ignoring it", "'a' or 'b'")
    assert "FLASHINFER_X" in message and "'yes'" in message
    assert "ignoring it" in message and "'a' or 'b'" in message


def test_an_unrecognised_gate_value_names_the_gate_the_value_and_the_accepted_ones():
    message = unrecognised_gate_value("true")
    assert GATE in message and "'true'" in message
    assert messages.ACCEPTED_GATE_VALUES in message and "'1'" in message and "off" in message
