import pytest

from kernelwright.files import atomic_write


def test_atomic_write_replaces_the_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "a.json"
    path.write_text("old")
    atomic_write(path, "new ✓")
    assert path.read_text(encoding="utf-8") == "new ✓"
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path):
    path = tmp_path / "a.json"
    path.write_text("old")
    with pytest.raises(TypeError):
        atomic_write(path, b"not text")  # type: ignore[arg-type]
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_a_path_is_inside_the_folders_only_when_reached_without_links(tmp_path):
    from kernelwright.files import outside_folders

    own, other = tmp_path / "own", tmp_path / "other"
    own.mkdir()
    other.mkdir()
    (other / "data").write_text("x")
    (own / "data").write_text("x")
    (own / "link").symlink_to(other / "data")
    assert outside_folders(own / "data", [own]) == ""
    assert outside_folders(other / "data", [own]) == "is not in the evaluation's own folders"
    assert outside_folders(own / "link", [own]) == "is reached through a link"
    assert outside_folders(own / ".." / "other" / "data", [own]) == "is not in the evaluation's own folders"
