"""[horovod] scale factor: 2-process throughput ÷ (1-process throughput × 2), LeNet and LSTM, three ways.

What 2 cores can show: a 1-process run uses both cores through TF's intra-op threads,
and two processes get one core each. So this scale factor mostly measures how the step
parallelises across cores. It cannot show the computation/communication overlap of a real
cluster, where each worker has its own accelerator and the allreduce crosses a network.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(model: str, mode: str, workers: int, steps: int) -> float:
    out = Path(tempfile.mkdtemp()) / "rate.json"
    cmd = [sys.executable, "benchmarks/horovod_worker.py", model, mode, str(steps), str(out)]
    if workers > 1:
        runner = shutil.which("horovodrun", path=os.path.dirname(sys.executable))
        cmd = [runner, "--gloo", "-np", str(workers), "-H", f"localhost:{workers}", *cmd]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(ROOT))
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True, timeout=900)
    return json.loads(out.read_text())["items_per_s_per_worker"]


def scale_factors() -> dict:
    rows = []
    for model, steps, unit in (("lenet", 120, "images/s"), ("lstm", 30, "words/s")):
        for mode in ("janus", "eager", "tf_function"):
            one = _run(model, mode, 1, steps)
            two = _run(model, mode, 2, steps)
            rows.append({"model": model, "unit": unit, "mode": mode, "one_process": one,
                         "two_processes_total": 2 * two, "scale_factor": (2 * two) / (one * 2)})  # fmt: skip
    return {"name": "horovod_scale", "rows": rows}


if __name__ == "__main__":
    result = scale_factors()
    print(json.dumps(result, indent=2))
    from benchmarks.harness import write_json  # imports TensorFlow: only in this process, not the workers'

    write_json("horovod.json", result)  # with the machine and the date
    from benchmarks.report import update_readme

    update_readme()
