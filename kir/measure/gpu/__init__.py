"""GPU evaluation in worker processes: the job, the worker, a pool of workers, and the
readers-writer lock that keeps timings from overlapping other GPU work."""
