# each core of the host alone: one thread of NumPy's BLAS on a 512 float32 square, pinned there;
# and the machine's CPU time by kind (/proc/stat: user, system, irq, softirq, steal) while it ran
head -1 /proc/stat > /tmp/stat0; grep '^cpu[0-9]' /proc/stat > /tmp/statc0
for c in $(seq 0 $(( $(nproc) - 1 ))); do
  OPENBLAS_NUM_THREADS=1 taskset -c $c python3 -c "
import time, numpy as np
a = np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32)
a @ a; t = []
for _ in range(40):
    s = time.perf_counter(); a @ a; t.append(time.perf_counter() - s)
t.sort(); print('cpu $c', 'best %.3f ms, median %.3f ms' % (t[0] * 1e3, t[len(t) // 2] * 1e3))"
done
head -1 /proc/stat > /tmp/stat1; grep '^cpu[0-9]' /proc/stat > /tmp/statc1
echo "fields: user nice system idle iowait irq softirq steal"; cat /tmp/stat0 /tmp/stat1; paste -d'\n' /tmp/statc0 /tmp/statc1
top -b -n 1 | head -25
