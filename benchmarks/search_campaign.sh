#!/usr/bin/env bash
# The GPU search campaign of BENCHMARKS.md ("The search (issue 5)"): every example in its own
# process (one example's failure cannot touch another's), evolve then random sharing one
# tuning database, then one merged table. Run on the GPU machine from outside the repository
# root (kir is installed there non-editable):
#     . .dev/setup.sh && R=$PWD && cd /tmp && bash $R/benchmarks/search_campaign.sh $R $OUT
# Seconds per strategy and worker counts are the ones the 2026-12-01 figures used; pass
# TIME_SCALE=2 (say) to give every search twice the time. A dry run without a GPU:
#     TARGET=model TIME_SCALE=0.05 bash benchmarks/search_campaign.sh $PWD /tmp/dry
set -u
R=${1:?repository root}; OUT=${2:?output folder}
SCALE=${TIME_SCALE:-1}
mkdir -p "$OUT"
run() {  # example, seconds per strategy, extra arguments
    local name=$1 seconds; shift
    seconds=$(python3 -c "print(max(1, round($1 * $SCALE)))"); shift
    timeout $(( 2 * seconds + 60 )) python3 "$R/benchmarks/search_gpu.py" --out "/tmp/s_$name" \
        --budget 300 --time "$seconds" --repeat 5 --only "$name" --no-compositions \
        --share-db --target "${TARGET:-cuda}" "$@" > "$OUT/s_$name.log" 2>&1
    echo "$name: exit $?"
}
run softmax 70 --gpu-workers 12 --workers 4
run layernorm 70 --gpu-workers 12 --workers 4
run sgemm 70 --gpu-workers 12 --workers 4
run flash_attn 85 --gpu-workers 8 --workers 8
run reduce 50 --gpu-workers 12 --workers 4
run selective_scan 50 --gpu-workers 12 --workers 4
python3 "$R/benchmarks/search_gpu.py" --merge /tmp/s_*/search_gpu.json --out "$OUT"
