"""What can be measured, and on which counters: the first layer of autoprof."""

from autoprof.catalog.model import Catalog, Event, Exclusion, Pmu

__all__ = ["Catalog", "Event", "Exclusion", "Pmu"]
