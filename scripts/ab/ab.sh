#!/usr/bin/env bash
# Alternating A/B runs of two builds, each run a fresh process, in the order A B B A A B …, so that a machine that
# drifts during the runs drifts for both:
#
#   bash scripts/ab/ab.sh <build A> <build B> throughput|run|idle|cancel [pairs, default 5]
#
# Prints one line per run: build, ratio against raw Piscina (same process), the engine's figure, Piscina's. Build
# each directory first (`npx tsc -p tsconfig.json`; a git worktree per commit, node_modules linked, is the usual way).
# On a shared machine stop everything else meanwhile: two benchmarks at once measure neither.
set -euo pipefail
a=$1; b=$2; what=$3; pairs=${4:-5}
here="$(cd "$(dirname "$0")" && pwd)"
for i in $(seq 1 "$pairs"); do
  if [ $((i % 2)) -eq 1 ]; then order="$a $b"; else order="$b $a"; fi
  for dir in $order; do
    node --expose-gc "$here/one.mjs" "$dir" "$what" | node -e '
      let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
        const [dir, , ...rest] = s.trim().split(" ");
        const r = JSON.parse(rest.join(" ")); const x = r.result ?? r;
        console.log(dir, x.ratio, x.opsPerSec ?? x.p50Us, x.baselineOpsPerSec ?? x.baselineP50Us);
      });'
  done
done
