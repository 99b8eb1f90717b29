#!/bin/bash
#SBATCH --job-name=slurmwatch-example
#SBATCH --slurmwatch=1
#SBATCH --cpus-per-task=1
#SBATCH --mem=512M
#SBATCH --time=00:05:00
# A small job with a memory bump and some CPU work, so the recording has something to show.
python3 - <<'PY'
import time
buf = bytearray(200 * 1024 * 1024)          # 200 MiB working set
for i in range(0, len(buf), 4096): buf[i] = 1
t = time.time()
while time.time() - t < 3: pass              # 3 s of one busy core
del buf
time.sleep(2)
print("example job done")
PY
