"""Names from untrusted input (attnstruct.untrusted): commit ids, relative file names, paths kept inside their
folder."""

import pytest

from attnstruct.untrusted import UnsafeName, commit_id, inside, relative_file

SHA = "0123456789abcdef0123456789abcdef01234567"


def test_a_commit_id_is_forty_lowercase_hex_digits():
    assert commit_id(SHA) == SHA
    for bad in ["../../etc/x", "/tmp/x", SHA.upper(), SHA[:-1], SHA + "0", SHA + "\n", "", None, 12]:
        with pytest.raises(UnsafeName, match="commit id"):
            commit_id(bad, "http://127.0.0.1:1")


@pytest.mark.parametrize("name", ["model.safetensors", "sub/model-00001-of-00002.bin", "a..b.bin", ".hidden"])
def test_a_relative_file_name_is_kept(name):
    assert relative_file(name, "the index") == name


@pytest.mark.parametrize(
    "name",
    ["", "/etc/passwd", "../x.bin", "a/../../x", "a//b", "./a", "a/.", "C:x", "c:\\x", "a\\..\\b", "a\nb", "a\0b", 3],
)
def test_a_name_that_could_leave_its_folder_is_refused_naming_where_it_came_from(name):
    with pytest.raises(UnsafeName, match="the index names"):
        relative_file(name, "the index")


def test_inside_keeps_paths_in_their_folder_and_follows_links(tmp_path):
    assert inside(tmp_path, "a", "b.json") == tmp_path / "a" / "b.json"
    for parts in [("..", "x"), ("/etc/passwd",), ("a/../../x",)]:
        with pytest.raises(UnsafeName, match="would lead out of"):
            inside(tmp_path, *parts)
    (tmp_path / "link").symlink_to(tmp_path.parent)
    with pytest.raises(UnsafeName):
        inside(tmp_path, "link", "x")
