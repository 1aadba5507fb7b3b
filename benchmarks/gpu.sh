#!/usr/bin/env bash
# The accuracy rubric's GPU figures in one run (benchmarks/README.md, "The rubric on a GPU"), for a machine
# with CUDA and no network:
#   1. Transformers & BERT part 7: the reference solution trained (benchmarks/rubric.py train);
#   2. BERT from the inside part 8: the notebook's fine-tuning (rubric.py train --assignment bert_inside);
#   3. the rubric over a class of N checkpoints, each assignment (rubric.py grade): the reference's and copies
#      degraded by growing noise, seconds per additional student with the class cache and without, the GPU
#      memory, and the first submission graded again (determinism);
#   4. `autograder rubric` itself on the two references (PASSES times, default once), merged into results folders.
#
#   bash benchmarks/gpu.sh DATA OUT
#
# DATA holds the encoder folder ($ENCODER_NAME, default all-MiniLM-L6-v2) and imdb.parquet (the columns
# orig_split, label, review); OUT receives log.txt, gpu.csv (memory sampled every 0.5 s) and results.tgz
# (every stage's JSON and log). Sizes come from the environment (defaults: the full setting):
#   TB_SUBSET TB_EPOCHS TB_EVALS  BI_SUBSET BI_EPOCHS  CLASS  VALID_LIMIT (0: all 7,500)
#   STAGE_LIMIT (seconds per stage)  BUDGET (seconds for the whole run: a stage gets at most what is left,
#   and none starts with under 20 s left, so that the results are packed before an outer time limit)
#   DEVICE (cuda; cpu for a dry run of the script on a machine without a GPU)
set -uo pipefail
DATA=$(realpath "${1:?DATA folder}"); OUT=$(realpath "${2:?OUT folder}")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ENC=$DATA/${ENCODER_NAME:-all-MiniLM-L6-v2}; IMDB=$DATA/imdb.parquet
WORK=${WORK:-/var/tmp/gpu-bench}  # not /tmp: confined workers have a private /tmp and read the cache from here
TB_SUBSET=${TB_SUBSET:-0} TB_EPOCHS=${TB_EPOCHS:-4} TB_EVALS=${TB_EVALS:-2}
BI_SUBSET=${BI_SUBSET:-0} BI_EPOCHS=${BI_EPOCHS:-2}
CLASS=${CLASS:-20} VALID_LIMIT=${VALID_LIMIT:-0} STAGE_LIMIT=${STAGE_LIMIT:-240} BUDGET=${BUDGET:-3600} DEVICE=${DEVICE:-cuda}
export PYTHONUNBUFFERED=1 TQDM_DISABLE=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$OUT" "$WORK"
LOG=$OUT/log.txt
limit_args=(--device "$DEVICE"); [ "$VALID_LIMIT" -gt 0 ] && limit_args+=(--valid-limit "$VALID_LIMIT")

say() { echo "$*" | tee -a "$LOG"; }

stage() {  # stage NAME COMMAND...: run it under the time limit, its output in WORK/NAME.log, a summary here
    local name=$1 start=$SECONDS rc limit=$((BUDGET - SECONDS - 15))
    shift
    [ "$limit" -gt "$STAGE_LIMIT" ] && limit=$STAGE_LIMIT
    if [ "$limit" -lt 20 ]; then say "== $name: skipped, the budget is spent"; return 124; fi
    say "== $name  $(date +%T)  (limit $limit s)  $*"
    echo "$name $(date +%H:%M:%S)" >>"$WORK/stages.txt"
    timeout -k 5 "$limit" "$@" >"$WORK/$name.log" 2>&1
    rc=$?
    say "   $name: exit $rc after $((SECONDS - start)) s"
    grep -v -i -E "warn|^\s*$|MISSING|newly initialized|^Notes|^-+$|\| *MISSING|^[a-z_.]+\.(weight|bias) *\|" \
        "$WORK/$name.log" | tail -n "${TAIL:-12}" | tee -a "$LOG"
    return $rc
}

nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader -lms 500 >"$OUT/gpu.csv" 2>&1 &
SAMPLER=$!
trap 'kill $SAMPLER 2>/dev/null; tar czf "$OUT/results.tgz" -C "$WORK" --exclude="*.pt" --exclude="cache*" \
      --exclude=".rubric-cache" --exclude="*.ipynb" . 2>/dev/null' EXIT

say "== machine: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader) | $(nproc) cores"
python3 -c "import sys, torch, transformers; print('python', sys.version.split()[0], '| torch', torch.__version__,
'| transformers', transformers.__version__, '| cuda', torch.cuda.is_available())" 2>&1 | tee -a "$LOG"
say "sizes: TB_SUBSET=$TB_SUBSET TB_EPOCHS=$TB_EPOCHS TB_EVALS=$TB_EVALS BI_SUBSET=$BI_SUBSET BI_EPOCHS=$BI_EPOCHS" \
    "CLASS=$CLASS VALID_LIMIT=$VALID_LIMIT STAGE_LIMIT=$STAGE_LIMIT BUDGET=$BUDGET"
cd "$ROOT" || exit 1
bench=(python3 "$ROOT/benchmarks/rubric.py")

stage tb-train "${bench[@]}" train --encoder "$ENC" --imdb "$IMDB" --train-subset "$TB_SUBSET" \
    --epochs "$TB_EPOCHS" --evals-per-epoch "$TB_EVALS" --out "$WORK/tb-ref"
stage bi-train "${bench[@]}" train --assignment bert_inside --encoder "$ENC" --imdb "$IMDB" \
    --train-subset "$BI_SUBSET" --epochs "$BI_EPOCHS" --out "$WORK/bi-ref"
TAIL=16 stage tb-grade "${bench[@]}" grade --encoder "$ENC" --imdb "$IMDB" \
    --checkpoint "$WORK/tb-ref/bert_gru_sentiment.pt" --submissions "$CLASS" --noise 0.02 --repeat 1 \
    "${limit_args[@]}" --out "$WORK/tb-grade"
TAIL=8 stage bi-grade "${bench[@]}" grade --assignment bert_inside --encoder "$ENC" --imdb "$IMDB" \
    --checkpoint "$WORK/bi-ref/bert_sentiment.pt" --submissions "$CLASS" --noise 0.01 --repeat 1 \
    "${limit_args[@]}" --out "$WORK/bi-grade"
for assignment in transformers_bert bert_inside; do  # the instructor's command on the same references
    case $assignment in transformers_bert) ref=tb-ref ;; *) ref=bi-ref ;; esac
    for pass in $(seq "${PASSES:-1}"); do
        TAIL=3 stage "rubric-$assignment-$pass" python3 -m autograder rubric "$assignment" "$WORK/$ref"/*.ipynb \
            --out "$WORK/rubric-$assignment-$pass" --encoder "$ENC" --imdb "$IMDB" "${limit_args[@]}"
    done
done
python3 - "$WORK" <<'EOF' 2>&1 | tee -a "$LOG"
import json, pathlib, sys
work = pathlib.Path(sys.argv[1])  # the reference's accuracy in every run that graded it: all must agree
for name, bench in (("transformers_bert", "tb-grade"), ("bert_inside", "bi-grade")):
    seen = {}
    try:
        runs = json.loads((work / bench / "benchmark.json").read_text())["runs"]
        for label, r in runs.items():
            seen[f"{bench} {label}"] = [r["accuracy"][0], *r["repeats"]]
    except (OSError, KeyError, IndexError, ValueError):
        pass
    for path in sorted(work.glob(f"rubric-{name}-*/*/rubric.json")):
        seen[str(path.parent.parent.name)] = [json.loads(path.read_text()).get("accuracy")]
    values = {repr(a) for accs in seen.values() for a in accs}
    print(f"{name} reference accuracy, every run that graded it: {seen}; identical: {len(values) == 1}")
EOF
kill $SAMPLER 2>/dev/null
echo "end $(date +%H:%M:%S)" >>"$WORK/stages.txt"
python3 - "$WORK/stages.txt" "$OUT/gpu.csv" <<'EOF' 2>&1 | tee -a "$LOG"
import sys  # the peak GPU memory (the whole card) and mean utilisation of each stage, from the 0.5 s samples
marks = [line.split() for line in open(sys.argv[1])]
samples = []
for row in open(sys.argv[2]):
    parts = [x.strip() for x in row.split(",")]
    try:
        samples.append((parts[0].split()[1][:8], int(parts[1].split()[0]), int(parts[2].split()[0])))
    except (IndexError, ValueError):
        continue
for (name, start), (_, end) in zip(marks, marks[1:]):
    inside = [(mem, util) for t, mem, util in samples if start <= t < end]
    if inside:
        print(f"gpu during {name}: peak {max(m for m, _ in inside)} MiB, mean utilisation "
              f"{sum(u for _, u in inside) / len(inside):.0f}%")
EOF
