"""The one vocabulary of stream endings: every ending maps to an outcome, and members mix with strings."""

from __future__ import annotations

import json

import pytest

from streamlab.core import errors
from streamlab.core.endings import OUTCOME_OF, Ending, Outcome, outcome_of


def test_every_ending_has_an_outcome_rule():
    assert set(OUTCOME_OF) == set(Ending)


@pytest.mark.parametrize("ending", list(Ending))
def test_an_ending_is_the_string_it_names_in_sets_dicts_json_and_formatting(ending):
    assert ending == ending.value and ending.value in {ending} and ending in {ending.value}
    assert {ending.value: 1}[ending] == 1
    assert json.loads(json.dumps(ending)) == ending.value
    assert f"{ending}" == str(ending) == ending.value and repr(ending) == repr(ending.value)


def test_outcomes_mix_with_strings_too():
    assert "truncated" in {Outcome.TRUNCATED} and {Outcome.FAILED: 1}["failed"] == 1


def test_a_clean_end_leaves_the_verdict_to_the_content():
    assert outcome_of(Ending.COMPLETE, Outcome.INCOMPLETE) is Outcome.INCOMPLETE
    assert outcome_of("complete") is None
    assert outcome_of(Ending.CUT, Outcome.COMPLETE) is Outcome.TRUNCATED  # a cut overrides what was read
    assert outcome_of("client_gone") is Outcome.CANCELLED


def test_every_abnormal_client_ending_has_exactly_one_exception_class():
    raised = {cls.ending for cls in errors.ENDING_ERRORS.values()}
    client_side = {e for e, o in OUTCOME_OF.items() if o is not None} - {
        Ending.CANCELLED,
        Ending.CLIENT_GONE,
        Ending.CUT,
        Ending.STOPPED,
    }
    assert raised == client_side
    for ending, cls in errors.ENDING_ERRORS.items():
        assert issubclass(cls, errors.StreamEndError) and cls.ending is ending


def test_every_exception_streamlab_defines_descends_from_the_one_root():
    classes = [v for v in vars(errors).values() if isinstance(v, type) and issubclass(v, BaseException)]
    assert classes and all(issubclass(c, errors.StreamlabError) for c in classes)
