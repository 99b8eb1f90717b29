#!/usr/bin/env bash
# `slurmwatch history` and `sizing` over a site's month (issue 16): generated sacct answers
# of 10^4, 10^5 and 10^6 jobs (the bench mix of core/src/history/fixture.rs spread over 30
# days, `--all-users`), served by a fake `sacct` first on PATH that prints the pre-generated
# answer for each chunk the real slurmwatch binary asks for, with the delimiter it asks
# (`history_bench_data replay`: sacct's fields are split by a fresh random string per call).
# Prints a table: wall time (median of RUNS), the serving floor (the same files replayed
# through a pipe: what serving them costs alone), time over that floor, CPU time (user +
# system, the fake sacct's included: what a loaded machine's wall time hides), peak memory (max RSS, /usr/bin/time's %M) and CPU per job.
#
#   scripts/bench-history.sh                 # SIZES="10000 100000 1000000" RUNS=3
#   SIZES="10000 100000" RUNS=1 scripts/bench-history.sh
#   SUMMARIES=1 scripts/bench-history.sh     # every job with a JS1: summary in AdminComment
#                                            # (real ones re-encoded with the job's id: no two
#                                            # alike), as a site that stores them
#
# No Slurm needed and none touched. The answers are generated once into
# target/bench-history/<N>/ (about 0.7 KB of sacct text per job: 0.7 GB for 10^6) and
# regenerated when the generator changes.
set -euo pipefail
cd "$(dirname "$0")/.."
target=$(realpath -m "${CARGO_TARGET_DIR:-target}")
work=$target/bench-history${SUMMARIES:+-summaries}
summaries=${SUMMARIES:+$PWD/core/tests/fixtures/slurm/admin_comments_js1_real.txt}
SIZES=${SIZES:-"10000 100000 1000000"}
RUNS=${RUNS:-3}
export TZ=UTC # the generator's times and slurmwatch's reading of them agree

cargo build -q --release -p slurmwatch-cli --bin slurmwatch
cargo build -q --release -p slurmwatch-core --example history_bench_data
sw=${SW:-$target/release/slurmwatch} # SW=: another build, to compare
gen=$target/release/examples/history_bench_data

median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

# One timed command: "wall_s max_rss_kb cpu_s" (user + system).
timed() {
  local out=$1
  shift
  /usr/bin/time -o "$out.time" -f '%e %M %U %S' "$@" > "$out" 2> "$out.err" || {
    echo "bench-history: failed: $* (see $out.err)" >&2
    cat "$out.err" >&2
    exit 1
  }
  awk '{printf "%s %s %.2f\n", $1, $2, $3 + $4}' "$out.time"
}

rows=()
for n in $SIZES; do
  d=$work/$n
  if [ ! -f "$d/ready" ] || [ "$gen" -nt "$d/ready" ]; then
    rm -rf "$d"
    mkdir -p "$d"
    echo "bench-history: generating $n jobs into $d ..." >&2
    # shellcheck disable=SC2086 # no file: no argument
    "$gen" "$n" "$d" $summaries
    cat > "$d/sacct" << EOF
#!/bin/sh
# The bench's sacct: the pre-generated answer of the chunk that -S names, split by the
# --delimiter asked (sacct's default \`|\` when none).
s=
d='|'
while [ \$# -gt 0 ]; do
  case \$1 in -S) s=\$2; shift ;; --delimiter=*) d=\${1#--delimiter=} ;; esac
  shift
done
exec "$gen" replay "\$(dirname "\$0")/chunk-\$s.txt" "\$d"
EOF
    chmod +x "$d/sacct"
    touch "$d/ready"
  fi
  read -r since until < "$d/window"
  mb=$(du -cm "$d"/chunk-*.txt | tail -1 | cut -f1)
  floor=$(for _ in $(seq "$RUNS"); do
    timed "$d/floor.out" sh -c 'for f in "$2"/chunk-*.txt; do "$1" replay "$f" "$3"; done | cat > /dev/null' \
      _ "$gen" "$d" "$(printf '\037%s\037' 0123456789abcdef)" | cut -d' ' -f1
  done | median)
  line="$n $mb $floor"
  for cmd in history sizing; do
    ts=()
    for _ in $(seq "$RUNS"); do
      ts+=("$(timed "$d/$cmd.json" env -u SLURMWATCH_SACCT PATH="$d:$PATH" "$sw" "$cmd" --all-users \
        -S "@$since" -E "@$until" --json --sacct-timeout 600 --spool "$d/no-spool")")
    done
    jobs=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["window"]["jobs"])' "$d/$cmd.json")
    if [ "$jobs" != "$n" ]; then
      echo "bench-history: $cmd read $jobs jobs of $n" >&2
      exit 1
    fi
    # With summaries, every job's figures came from its AdminComment.
    used=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["window"]["slurmdbd_summaries"])' "$d/$cmd.json")
    if [ -n "${SUMMARIES:-}" ] && [ "$used" != "$n" ]; then
      echo "bench-history: $cmd used $used summaries of $n jobs" >&2
      exit 1
    fi
    wall=$(printf '%s\n' "${ts[@]}" | cut -d' ' -f1 | median)
    rss=$(printf '%s\n' "${ts[@]}" | cut -d' ' -f2 | sort -n | tail -1)
    cpu=$(printf '%s\n' "${ts[@]}" | cut -d' ' -f3 | median)
    line="$line $wall $rss $cpu"
  done
  rows+=("$line")
done

echo "$("$sw" --version) ($(git rev-parse --short HEAD 2>/dev/null || echo ?)), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), median of $RUNS"
printf '%s\n' "${rows[@]}" | awk '
BEGIN {
  printf "| jobs | sacct text | serving floor | history wall | over floor | CPU | max RSS | sizing wall | over floor | CPU | max RSS | CPU per job |\n"
  printf "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
}
{
  n = $1; over_h = $4 - $3; over_s = $7 - $3
  if (over_h < 0) over_h = 0
  if (over_s < 0) over_s = 0
  printf "| %d | %d MB | %.2f s | %.2f s | %.2f s | %.2f s | %.0f MB | %.2f s | %.2f s | %.2f s | %.0f MB | %.1f µs |\n",
    n, $2, $3, $4, over_h, $6, $5 / 1024, $7, over_s, $9, $8 / 1024, $6 * 1e6 / n
  N[NR] = n; T[NR] = over_h; C[NR] = $6; M[NR] = $5
}
END {
  for (i = 2; i <= NR; i++)
    printf "jobs ×%.0f: history wall over the floor ×%.1f, CPU ×%.1f, max RSS ×%.1f\n",
      N[i] / N[i - 1], T[i] / (T[i - 1] > 0 ? T[i - 1] : 1e-9), C[i] / (C[i - 1] > 0 ? C[i - 1] : 1e-9), M[i] / M[i - 1]
}'
