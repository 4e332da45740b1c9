"""bench.procs.ThreadCpu: a process's CPU by thread, threads that ended during the measurement included."""

import os
import threading
import time

from bench.procs import ThreadCpu, thread_cpu


def test_the_cpu_of_a_thread_that_ended_is_counted() -> None:
    done = threading.Event()
    tid: list[int] = []

    def spin() -> None:
        tid.append(threading.get_native_id())
        while time.thread_time() < 0.5:  # this thread's own CPU
            pass
        done.set()

    sampler = ThreadCpu(os.getpid(), every=0.05).start()
    worker = threading.Thread(target=spin)
    worker.start()
    worker.join()
    assert done.is_set() and tid[0] not in thread_cpu(os.getpid())  # gone before the measurement ends
    used = sampler.stop()
    assert sum(used.values()) >= 0.4, used
