"""The vendor data autoprof ships: extracted once, whole, into a folder named by its digest."""

from __future__ import annotations

import multiprocessing
import tarfile

from autoprof.catalog import embedded, intel


def test_the_shipped_intel_data_is_a_perfmon_directory_with_its_license(tmp_path):
    root = embedded.directory("intel", tmp_path)
    assert root is not None and root.parent == tmp_path
    platforms = intel.platform_cpu_ids(root)
    assert len(platforms) >= 40 and "SKX" in platforms
    assert (root / "SKX" / "metrics").is_dir()  # TMA metrics travel with the events
    assert "BSD 3-Clause" in (root / "LICENSE").read_text()  # the data set travels whole
    assert "intel/perfmon" in (root / "SOURCE").read_text()


def test_every_shipped_data_set_carries_its_license_and_source(tmp_path):
    for vendor, license_text in (("amd", "GPL-2.0"), ("arm64", "GPL-2.0")):
        root = embedded.directory(vendor, tmp_path)
        assert root is not None and (root / "mapfile.csv").is_file()
        assert license_text in (root / "LICENSE").read_text()
        assert "linux" in (root / "SOURCE").read_text().lower()


def test_it_is_extracted_once_and_reused(tmp_path):
    first = embedded.directory("intel", tmp_path)
    assert first is not None
    marker = first / "extracted-once"
    marker.write_text("")
    assert embedded.directory("intel", tmp_path) == first and marker.exists()
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # no scratch folder left


def _extract(cache):
    return str(embedded.directory("intel", cache))


def test_two_processes_extracting_at_once_agree(tmp_path):
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        found = pool.map(_extract, [tmp_path, tmp_path])
    assert found[0] == found[1]
    assert [p.name for p in tmp_path.iterdir()] == [found[0].rsplit("/", 1)[1]]


def test_no_member_of_the_archive_escapes_its_folder():
    with tarfile.open(embedded.archive("intel")) as tar:
        names = tar.getnames()
    assert all(not n.startswith("/") and ".." not in n.split("/") for n in names)


def test_a_vendor_without_shipped_data_has_none(tmp_path):
    assert embedded.directory("no-such-vendor", tmp_path) is None
