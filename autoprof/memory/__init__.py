"""Heap profiles over time: valgrind massif's output parsed (`massif`), a run under valgrind
(`profile`) and its picture (`plot`)."""
