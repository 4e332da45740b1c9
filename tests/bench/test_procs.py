"""bench.procs.ThreadCpu: a process's CPU by thread, threads that ended during the measurement included."""

import subprocess
import sys

from bench.procs import ThreadCpu, thread_cpu

# A process whose one extra thread uses 0.5 CPU s and ends; the process then says so and lives on a while
CHILD = """
import threading, time
def spin():
    while time.thread_time() < 0.5:
        pass
t = threading.Thread(target=spin)
t.start()
tid = t.native_id
t.join()
print(tid, flush=True)
time.sleep(2)
"""


def test_the_cpu_of_a_thread_that_ended_is_counted() -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    try:
        sampler = ThreadCpu(child.pid, every=0.05).start()
        tid = int(child.stdout.readline())
        assert tid not in thread_cpu(child.pid)  # gone before the measurement ends
        used = sampler.stop()
    finally:
        child.kill()
        child.wait()
    assert sum(used.values()) >= 0.4, used
