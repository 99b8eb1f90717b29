#!/usr/bin/env bash
# After every phase of the cluster tier: a test that its phase gate (tests/harness `runs_in`)
# skipped in every phase never ran at all, and fails the tier here instead of counting as
# passed. Run by scripts/test.sh when all phases ran.
set -euo pipefail
dir=/tmp/slurmwatch-it/phases
[ -d "$dir" ] || { echo "check-phases: no phase records in $dir: did the cluster tier run?" >&2; exit 1; }
guest_list=$(dirname "$0")/vm/guest-tests.txt
never=()
for f in "$dir"/*.skipped; do
  [ -e "$f" ] || continue
  t=$(basename "$f" .skipped)
  # Phase::Guest tests run in the VM tier's guests, whose scripts/vm/check.py requires the
  # ones guest-tests.txt lists: one missing there would run nowhere.
  if [ "$(cat "$f")" = Guest ]; then
    grep -q "::$t\$" "$guest_list" || never+=("$t (Phase::Guest, not in scripts/vm/guest-tests.txt)")
    continue
  fi
  [ -e "$dir/$t.ran" ] || never+=("$t")
done
ran=$(find "$dir" -name '*.ran' | wc -l)
if [ ${#never[@]} -gt 0 ]; then
  echo "check-phases: skipped in every phase, never ran: ${never[*]}" >&2
  exit 1
fi
echo "check-phases: every gated test ran in its phase ($ran gated tests)"
