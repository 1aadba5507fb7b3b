"""A check run again with the reference's parts in place of the student's (depends_on) says only what is true:
graded with the reference's parts when that run is better; on a tie, which run the message is about and that the
student's own parts gave the same score (nothing where both runs say the same), never that the points were lost in
this part alone."""
from autograder.judge import Judge
from autograder.testing import CheckSpec

SPEC = CheckSpec("MHA: output", 3, "2. Multi-head attention", depends_on=("scaled_dot_product",))


def test_a_better_run_with_the_references_parts_is_graded_so():
    own, again = (0.0, "your scaled_dot_product raised ValueError", False), (1 / 3, "the output differs", False)
    assert Judge._better(list(SPEC.depends_on), own, again) == (1 / 3, "the output differs\n(graded with the reference's "
                                               "scaled_dot_product in place of yours, so that only this part counts "
                                               "here)", False)


def test_a_tie_says_which_run_the_message_is_about_and_claims_nothing_else():
    own, again = (0.0, "your scaled_dot_product raised ValueError", False), (0.0, "the output differs", False)
    score, message, _ = Judge._better(list(SPEC.depends_on), own, again)
    assert score == 0.0
    assert message == ("the output differs\n(this is the run with the reference's scaled_dot_product in place of "
                       "yours; yours gave the same score)")
    assert "only this part counts" not in message


def test_a_worse_run_with_the_references_parts_leaves_the_students_own():
    own = (0.5, "half the heads differ", True)
    assert Judge._better(list(SPEC.depends_on), own, (0.0, "the reference could not answer", False)) == own


def test_full_marks_with_the_references_parts_say_how_they_were_graded():
    assert Judge._better(list(SPEC.depends_on), (0.0, "your scaled_dot_product raised", False), (1.0, "", False)) == \
        (1.0, "(graded with the reference's scaled_dot_product in place of yours, so that only this part counts here)",
         False)


def test_nothing_stood_in_for_the_students_parts_keeps_the_first_run_and_claims_nothing():
    own, again = (0.0, "your MomentumSGD raised ValueError", False), (0.0, "your MomentumSGD raised ValueError", False)
    assert Judge._better([], own, again) == own  # (a plain class cannot stand in: the second run was the first)


def test_a_tie_with_the_same_message_says_nothing_of_the_second_run():
    # the student's scaled_dot_product is right and their MHA wrong: both runs fail alike, and a note about the
    # reference's scaled_dot_product would send them looking at a part that is fine
    own = again = (0.0, "your MultiHeadAttention's output differs", False)
    assert Judge._better(list(SPEC.depends_on), own, again) == own

