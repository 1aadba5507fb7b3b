"""Part 8: the accuracy rubric of the fine-tuned classifier the student hands in (`bert_sentiment.pt`).

The checkpoint is the state_dict of a fine-tuned AutoModelForSequenceClassification (kind "sequence_classifier",
autograder/deferred/accuracy/checkpoints.py): the grader builds the library's class for bert-base-uncased with 2 labels, loads the
checkpoint in a confined worker and measures the accuracy on the 7,500 reviews of the seeded validation split,
truncated to 256 tokens, with attention masks. Points: 8 x clamp((accuracy - 0.80) / 0.10, 0, 1). Without CUDA
`autograder grade` reports it pending, never failed; `autograder rubric bert_inside ...` on a GPU machine adds its
points (docs/rubric.md).
"""
from autograder.rubric import rubric_check

validation_accuracy = rubric_check(
    name="8. validation accuracy (rubric)", points=8, part="8. Fine-tuned model (rubric)",
    kind="sequence_classifier", checkpoint="bert_sentiment.pt", num_labels=2, floor=0.80, full=0.90,
    max_len=256, batch_size=32)
