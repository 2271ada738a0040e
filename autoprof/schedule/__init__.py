"""Packing a catalog's events into the fewest runs the counters allow."""

from autoprof.schedule.packer import schedule
from autoprof.schedule.plan import Placement, Plan, Run

__all__ = ["Placement", "Plan", "Run", "schedule"]
