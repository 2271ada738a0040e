"""The live check before the first run: every planned string's terms exist in its PMU's sysfs
``format/`` and each value fits the term's bits; what does not is left out with its reason.
A fake sysfs tree in tmp_path stands for the machine (the kernel's real format texts)."""

from __future__ import annotations

import pytest

from autoprof.catalog import encoding, formats, intel
from autoprof.catalog.model import Catalog, Event, Pmu
from autoprof.testing import kernel_formats


def test_format_texts_are_read_as_the_kernel_writes_them():
    assert formats.parse_format("config:0-7,32-35\n") == [("config", 0, 7), ("config", 32, 35)]
    assert formats.parse_format("config1:32") == [("config1", 32, 32)]
    assert formats.width(formats.parse_format("config:8-15,32-55")) == 32
    with pytest.raises(ValueError):
        formats.parse_format("umask 8-15")


def _cha(name: str, style: str = encoding.UNCORE, **fields) -> Event:
    return Event(name, "uncore_cha", counters=frozenset({0}), style=style, **fields)


def test_misfits_are_left_out_with_the_reason(tmp_path):
    kernel_formats.write_tree(tmp_path, kernel_formats.INTEL["SPR"])
    fits = _cha("FITS", code=0x35, umask=0xFFFFFFFF)
    wide = _cha("WIDE", code=0x36, umask=0x78C86FFE20)  # UMaskExt beyond umask_ext4's 24 bits
    stray = _cha("STRAY", code=0x35, terms=(("occ_sel", 1),))
    raw = _cha("RAW", style=encoding.RAW, terms=(("config", 0x78C86FFE2036),))
    absent = Event("X", "uncore_nowhere", counters=frozenset({0}), style=encoding.UNCORE, code=1)
    sw = Event("task-clock", "software")
    pmus = {p: Pmu(p, generic=4) for p in ("uncore_cha", "uncore_nowhere")}
    catalog = Catalog("GenuineIntel-6-8F-0", pmus, [fits, wide, stray, raw, absent, sw])
    kept = formats.without_misfits(catalog, tmp_path)
    assert [e.name for e in kept.events] == ["FITS", "RAW", "X", "task-clock"]
    reasons = {x.name: x.reason for x in kept.excluded}
    assert reasons["WIDE"].startswith(
        "umask=0x78c86ffe20 does not fit the kernel's uncore_cha format config:8-15,32-55 (32 bits)"
    )
    assert reasons["STRAY"].startswith("the kernel's uncore_cha format has no term 'occ_sel'")
    assert str(tmp_path) in reasons["WIDE"]
    assert set(kept.pmus) == {"uncore_cha", "uncore_nowhere"}


def test_a_catalog_that_fits_is_kept_whole(tmp_path, intel_dir):
    """SKX's whole catalog against SKX's formats: nothing left out (the kernel-format test
    checks the same strings with perf itself)."""
    kernel_formats.write_tree(tmp_path, kernel_formats.INTEL["SKX"])
    skx = intel.load(intel_dir, "SKX")
    assert formats.without_misfits(skx, tmp_path) is skx


def test_box_types_are_read_from_their_first_box(tmp_path):
    wanted = ("uncore_cha", "uncore_iio")
    kernel_formats.write_tree(tmp_path, [p for p in kernel_formats.INTEL["SKX"] if p[0] in wanted])
    cha = formats.read_pmu(tmp_path, "uncore_cha")
    assert cha is not None and cha["filter_rem"] == [("config1", 32, 32)]
    assert formats.read_pmu(tmp_path, "uncore_ch") is None
    assert formats.pmu_folder(tmp_path, "uncore_iio") == tmp_path / "uncore_iio_0"
