"""A check's status from its score."""
from autograder.status import FAILED, PARTIAL, PASSED, status_of


def test_a_fraction_a_rounding_error_away_from_zero_or_one_is_no_partial_credit():
    assert status_of(1 - 1 / 3 - 2 / 3, 1) == FAILED  # 1.1e-16
    assert status_of(3 * (1 / 3 + 1 / 3 + 1 / 3 - 1e-15), 3) == PASSED
    assert status_of(0.5, 1) == PARTIAL and status_of(0.0, 0) == PASSED
