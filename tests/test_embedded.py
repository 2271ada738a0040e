"""The vendor data autoprof ships: extracted once, whole, into a folder named by its digest."""

from __future__ import annotations

import io
import multiprocessing
import tarfile

import pytest

from autoprof.catalog import embedded, intel, unpack


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


def _archive(path, *members: tuple[tarfile.TarInfo, bytes]) -> None:
    with tarfile.open(path, "w") as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)


def _info(name: str, kind: bytes = tarfile.REGTYPE, mode: int = 0o644, link: str = ""):
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.linkname = kind, mode, link
    return info


BAD = [
    _info("/etc/evil"),  # absolute: the filter strips the slash, so this one lands inside
    _info("../outside"),
    _info("a/../../outside"),
    _info("link", tarfile.SYMTYPE, link="/etc/passwd"),
    _info("fifo", tarfile.FIFOTYPE),
    _info("dev", tarfile.CHRTYPE),
]


@pytest.mark.parametrize("member", BAD, ids=[m.name for m in BAD])
def test_without_the_data_filter_members_are_checked_as_the_filter_checks_them(tmp_path, member):
    """Python 3.11.0-3.11.3 (Debian 12 has 3.11.2) have no extractall(filter="data"): each member
    passes `data_member` instead. What the filter refuses, it refuses (it refuses links and
    special files of any kind, which the shipped data has none of); what it lets in lands
    inside the folder."""
    archive = tmp_path / "a.tar"
    _archive(archive, (member, b"x"))
    results = {}
    for data_filter in (True, False):
        folder = tmp_path / f"out-{data_filter}"
        folder.mkdir()
        with tarfile.open(archive) as tar:
            try:
                unpack.extract(tar, folder, data_filter=data_filter)
                results[data_filter] = "ok"
            except tarfile.TarError:
                results[data_filter] = "refused"
        assert not (tmp_path / "outside").exists()
    if results[True] == "refused":
        assert results[False] == "refused"
    if results[False] == "ok":
        assert (tmp_path / "out-False" / member.name.lstrip("/")).is_file()


def test_without_the_data_filter_modes_are_the_filters(tmp_path):
    archive = tmp_path / "a.tar"
    members = [(_info("dir", tarfile.DIRTYPE, 0o777), b""), (_info("dir/f", mode=0o4777), b"y")]
    members += [(_info("g", mode=0o040), b"z")]
    _archive(archive, *members)
    modes = {}
    for data_filter in (True, False):
        folder = tmp_path / str(data_filter)
        folder.mkdir()
        with tarfile.open(archive) as tar:
            unpack.extract(tar, folder, data_filter=data_filter)
        modes[data_filter] = {
            p.relative_to(folder).as_posix(): p.stat().st_mode & 0o7777
            for p in sorted(folder.rglob("*"))
            if p.is_file()
        }
    assert modes[False] == modes[True] == {"dir/f": 0o755, "g": 0o640}


def test_the_shipped_data_extracts_without_the_data_filter(tmp_path):
    with tarfile.open(embedded.archive("arm64")) as tar:
        unpack.extract(tar, tmp_path, data_filter=False)
    assert (tmp_path / "mapfile.csv").is_file() and (tmp_path / "LICENSE").is_file()
