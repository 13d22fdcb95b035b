"""compute.workers: jobs on threads that live as long as the process."""
import threading

import pytest

from bubbleflow.compute import workers


def test_jobs_submitted_together_run_side_by_side():
    """Each job waits for the other to start: both end only where they run at once."""
    first, second = threading.Event(), threading.Event()

    def meet(mine, other):
        mine.set()
        return other.wait(10)

    jobs = [workers.submit(meet, first, second, name="bubbleflow-meet-a"),
            workers.submit(meet, second, first, name="bubbleflow-meet-b")]
    assert [job.result(20) for job in jobs] == [True, True]


def test_a_job_gives_its_value_or_raises_its_error():
    assert workers.submit(lambda a, b=0: a + b, 2, b=3).result(10) == 5
    job = workers.submit(int, "not a number")
    assert job.join(10) and job.done() and not job.is_alive()
    with pytest.raises(ValueError, match="not a number"):
        job.result()


def test_a_job_not_ended_in_time_says_so():
    release = threading.Event()
    job = workers.submit(release.wait, 10, name="bubbleflow-held")
    try:
        assert not job.join(0.05) and job.is_alive()
        with pytest.raises(TimeoutError, match="bubbleflow-held"):
            job.result(0.05)
    finally:
        release.set()
    assert job.result(10) is True


def test_workers_outlive_their_jobs_and_are_reused():
    """A worker carries its job's name while it runs it, then waits for the
    next job: jobs one after the other start no new thread."""
    seen = []

    def name():
        seen.append(threading.current_thread())
        return threading.current_thread().name

    assert workers.submit(name, name="bubbleflow-named").result(10) == "bubbleflow-named"
    count = len(workers.worker_names())
    for _ in range(20):
        workers.submit(name).result(10)
    assert len(workers.worker_names()) == count
    assert all(t.is_alive() and t.daemon for t in seen)


def test_a_process_that_ends_finishes_the_jobs_it_waits_for(tmp_path):
    """A job submitted with ``wait_at_exit`` is finished before the process
    ends; the others are left to the daemon workers' fate."""
    import subprocess
    import sys

    script = (
        "import pathlib, sys, time\n"
        "from bubbleflow.compute import workers\n"
        "def late(path, seconds):\n"
        "    time.sleep(seconds)\n"
        "    pathlib.Path(path).write_text('done')\n"
        "workers.submit(late, sys.argv[1], 0.5, wait_at_exit=True)\n"
        "workers.submit(late, sys.argv[2], 5.0)\n")
    kept, dropped = tmp_path / "kept", tmp_path / "dropped"
    done = subprocess.run([sys.executable, "-c", script, str(kept), str(dropped)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert kept.read_text() == "done"
    assert not dropped.exists()


def test_a_worker_that_cannot_start_leaves_the_pool_usable(monkeypatch):
    """A refused thread start raises in the caller, and the next job still
    gets a worker (the pool does not count the one that never ran)."""
    pool = workers._Pool()
    real = threading.Thread.start
    refused = []

    def start(self):
        if not refused:
            refused.append(self)
            raise RuntimeError("can't start new thread")
        real(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        pool.submit(workers.Job(int, ("1",), {}, "bubbleflow-refused"))
    assert pool.names() == []
    # A job the process would wait for at exit is not waited for when it
    # never ran.
    monkeypatch.setattr(workers, "_POOL", pool)
    refused.clear()
    with pytest.raises(RuntimeError, match="can't start new thread"):
        workers.submit(int, "1", wait_at_exit=True)
    assert not workers._AT_EXIT
    job = pool.submit(workers.Job(int, ("2",), {}, "bubbleflow-second"))
    assert job.result(10) == 2
    for _ in range(3):          # one at a time: the one worker takes each
        assert pool.submit(workers.Job(int, ("3",), {}, "bubbleflow-next")).result(10) == 3
    assert len(pool.names()) == 1
