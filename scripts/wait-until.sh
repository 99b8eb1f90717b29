# Sourced by the scripts that wait on Slurm: every wait has a deadline and says what it
# waited for when it gives up.
#   wait_until SECONDS "what" COMMAND...   (polls COMMAND every 0.5 s until it succeeds)
wait_until() {
  local limit=$1 what=$2 end
  shift 2
  end=$((SECONDS + limit))
  until "$@"; do
    if ((SECONDS >= end)); then
      echo "$(basename "$0"): gave up after ${limit}s waiting for $what" >&2
      return 1
    fi
    sleep 0.5
  done
}
