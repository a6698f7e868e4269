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


def test_locked_beside_lets_one_holder_in_at_a_time(tmp_path):
    import threading

    from kernelwright.files import locked_beside

    path = tmp_path / "cache" / "entry.json"
    held, release, order = threading.Event(), threading.Event(), []

    def first():
        with locked_beside(path):
            order.append("first in")
            held.set()
            release.wait(30)
            order.append("first out")

    def second():
        held.wait(30)
        with locked_beside(path):
            order.append("second in")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    assert held.wait(30)
    threads[1].join(timeout=0.5)
    assert threads[1].is_alive() and order == ["first in"]  # the second waits while the first holds it
    release.set()
    for thread in threads:
        thread.join(30)
    assert order == ["first in", "first out", "second in"] and (tmp_path / "cache" / "entry.lock").exists()
