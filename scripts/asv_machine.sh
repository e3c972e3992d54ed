#!/usr/bin/env bash
# Register this machine with asv under a stable name (default: polymm-<cores>core-<hostname>),
# with every field filled in (`asv machine --yes` stores only the fields that differ from its
# guesses, so the dashboard would show blanks). Prints the name.
#   scripts/asv_machine.sh [NAME]        (PYTHON=... selects the Python that has asv)
# asv keeps machine descriptions in ~/.asv-machine.json; results go to asv_bench/results/NAME/.
set -euo pipefail
python="${PYTHON:-python}"
ncpu="$(nproc)"
name="${1:-polymm-${ncpu}core-$(hostname -s)}"
gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)"
"$python" - "$name" "$gpu" <<'PY'
import sys
from asv.machine import Machine, MachineCollection

name, gpu = sys.argv[1], sys.argv[2]
info = Machine.get_defaults()
info["machine"] = name
cpu = info["cpu"] or "unknown CPU"
info["cpu"] = f"{cpu} ({info['num_cpu']} cores)" + (f", GPU: {gpu}" if gpu else "")
info["ram"] = f"{int(info['ram']) // 2**30} GB" if info["ram"].isdigit() else info["ram"]
MachineCollection.save(name, info)
PY
echo "$name"
