"""Distributed profiling on an existing job queue: RQ on Redis.

    submit (any machine)  --enqueue-->  queue host:NAME | cpu:ID | extra  --> worker (target)
    worker: one job at a time: allow-list, quiet machine, profile, aggregate, upload to the store

- `spec`: what a job asks for (`JobSpec`), as plain JSON; the allow-list check.
- `connection`: Redis URLs (--redis / $AUTOPROF_REDIS), masked in every message; queue names.
- `jobs`: submit, list, show, cancel (the client side).
- `worker`: the worker, its job class and the job function.

Jobs are serialized with RQ's JSON serializer, never pickle: whoever can write to Redis could
otherwise run any code on a worker. The worker runs only `spec.JOB_FUNCTION`.
"""
