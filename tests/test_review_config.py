"""Review of baselines.config.load_sections (b8c7d58): the strict loader's other refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from baselines.config import load_config
from baselines.sft import load_sft_config


def test_yaml_merge_keys_still_load(tmp_path: Path) -> None:
    """The strict loader exists to refuse a duplicate key. It also refuses YAML merge keys
    (``<<: *anchor``), which ``yaml.safe_load`` reads and which SFT configs accepted before
    load_sections: "could not determine a constructor for the tag 'tag:yaml.org,2002:merge'".
    A merged key overridden in the same mapping is not a duplicate."""
    base = tmp_path / "merge2.yaml"
    base.write_text("model:\n  <<: {path: tiny, dtype: float32}\n  dtype: float32\n")
    assert load_sft_config(base).model.path == "tiny"


@pytest.mark.parametrize(
    "content",
    [b"? [a, b]\n: 1\n", b"\xff\xfe train: {}\n"],
    ids=["unhashable-key", "not-utf8"],
)
def test_a_bad_file_is_a_value_error_naming_it(tmp_path: Path, content: bytes) -> None:
    """load_sections' docstring: "ValueError: not valid YAML ... (the message names the key)".
    An unhashable key raises TypeError from the duplicate check, a non-UTF-8 file
    UnicodeDecodeError, neither naming the file."""
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="bad.yaml"):
        load_config(path)
