"""`autograder rubric <name> SUBMISSIONS... --out DIR`: the GPU accuracy rubric, merged into earlier results
(autograder/rubric/command.py does the batch)."""
from __future__ import annotations

from autograder.commands.base import Command, positive


class RubricCommand(Command):
    def add_arguments(self, parser) -> None:
        parser.add_argument("assignment", help="assignment name (solutions/<name>) or a release/solutions folder")
        parser.add_argument("submissions", nargs="+", help="submitted .ipynb files (the checkpoint lies next to each)")
        parser.add_argument("--out", required=True, help="the results folder of `autograder grade` to merge into")
        parser.add_argument("--checkpoint-dir", help="checkpoints as DIR/<submission id>/<checkpoint file> instead")
        parser.add_argument("--encoder", help="hub id or local folder (default: $BERT_ENCODER or bert-base-uncased)")
        parser.add_argument("--imdb", help="IMDB parquet file (default: $IMDB_PATH or datasets.load_dataset('imdb'))")
        parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                            help="auto: CUDA, else report pending; cpu: grade on the CPU anyway (slow)")
        parser.add_argument("--precision", choices=("auto", "fp32", "mixed"), default="auto",
                            help="encoder precision for the cache (auto: mixed on CUDA, fp32 on CPU)")
        parser.add_argument("--no-cache", action="store_true",
                            help="full forward for every submission (no shared cache)")
        parser.add_argument("--cache-dir", help="where the encoder's hidden states are kept (default: OUT/.rubric-cache)")
        parser.add_argument("--valid-limit", type=positive(int),
                            help="only the first N validation reviews (smoke runs; not for grades)")
        parser.add_argument("--timeout", type=positive(float), default=1800.0, help="seconds per submission (default 1800)")
        parser.add_argument("--cluster", metavar="ADDRESS",
                            help="grade on a Ray cluster: one actor per GPU, each with its own encoder cache "
                                 "(`local` starts Ray on this machine; needs the cluster extra)")
        parser.add_argument("--course", help="an nbgrader course: write the rubric's points into its gradebook too "
                            "(default: the course whose submitted/ tree the submissions come from)")
        parser.add_argument("--trusted-submissions", action="store_true",
                            help="grade even where student code cannot be confined at all here (neither "
                            "namespaces nor a file allowlist): only for submissions you trust")
        parser.add_argument("--quiet", action="store_true")

    def run(self, args) -> int:
        from pathlib import Path

        from autograder.rubric import command
        from autograder.rubric.options import RubricCommandOptions, RubricOptions

        measure = RubricOptions(encoder=args.encoder, imdb=args.imdb, device=args.device, precision=args.precision,
                                cache=not args.no_cache, cache_dir=Path(args.cache_dir) if args.cache_dir else None,
                                valid_limit=args.valid_limit, timeout=args.timeout, trusted=args.trusted_submissions)
        return command.run(RubricCommandOptions(
            assignment=args.assignment, submissions=args.submissions, out=args.out, measure=measure,
            checkpoint_dir=Path(args.checkpoint_dir) if args.checkpoint_dir else None, cluster=args.cluster,
            course=Path(args.course) if args.course else None, quiet=args.quiet))
