"""The PMU lane: a Debian 12 arm64 kernel with its real `armv8_pmuv3` driver under
`qemu-system-aarch64 -icount shift=0`, running the checked-out autoprof with Debian's own
Python (issue #28). `lane.build` makes (and caches) what a boot needs, `lane.boot` runs
`guest.py` in it once and returns what each check found; tests/test_pmu_lane.py asserts it.
"""
