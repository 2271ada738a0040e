"""Running a plan: the profile options, the out/ folder and its files, the journal, the
runner (perf per run, attach, retries), preflight checks and the profile pipeline."""
