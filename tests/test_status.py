"""A check's status from its score."""
from autograder.status import FAILED, PARTIAL, PASSED, status_of


def test_a_fraction_a_rounding_error_away_from_zero_or_one_is_no_partial_credit():
    assert status_of(1 - 1 / 3 - 2 / 3, 1) == FAILED  # 1.1e-16
    assert status_of(3 * (1 / 3 + 1 / 3 + 1 / 3 - 1e-15), 3) == PASSED
    assert status_of(0.5, 1) == PARTIAL and status_of(0.0, 0) == PASSED


def test_a_full_check_scores_its_points_exactly_and_a_part_never_above_them():
    """A check worth a third of 2 points (otter shares a question's points among its cases) scores exactly that
    when it passes: 0.666667 three times totals 2.000001, above the maximum on Gradescope."""
    from autograder.status import points_of

    third = 2 / 3
    assert points_of(1.0, third) == third and 3 * points_of(1.0, third) <= 2
    assert points_of(1 - 1 / 3 - 2 / 3 + 1, third) == third  # a fraction one rounding error from 1
    assert points_of(0.5, third) == 0.333333 and points_of(1e-17, 1.0) == 0.0 and points_of(0.7, 8) == 5.6
