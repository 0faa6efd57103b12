"""Stand-ins for Hugging Face models, configurations and tokenizers that
cannot be fetched (no network, no local copy).

``from_pretrained`` is tried as written first: a cached or local model is the
real one. When it fails to fetch, the stand-in is built from what the name
says: the model type (``bert-base-uncased`` is a ``bert``, the longest model
type of transformers' own table found in the name), transformers' default
configuration of that type with the script's own settings (``num_labels=3``),
random weights, and a byte-level tokenizer (every text encodes, to ids below
263, that any vocabulary holds). A default configuration too large for a few
CPU steps (a 7B Llama) keeps its width but two layers, and the note says so.
A name whose type cannot be told is not stood in for: the script meets the
real error.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from torchwise.run.standins.weights import download_failed, one_line

Note = Callable[[str], None]
Patch = Callable[[Any, str, Any], None]

#: ``from_pretrained`` keywords that are about loading, not the configuration.
_LOADING = frozenset(
    {
        "cache_dir", "force_download", "local_files_only", "token", "use_auth_token",
        "revision", "proxies", "subfolder", "trust_remote_code", "resume_download",
        "mirror", "from_tf", "from_flax", "state_dict", "output_loading_info", "variant",
        "use_safetensors", "device_map", "max_memory", "offload_folder", "offload_state_dict",
        "low_cpu_mem_usage", "quantization_config", "load_in_8bit", "load_in_4bit",
        "attn_implementation", "ignore_mismatched_sizes", "torch_dtype", "dtype",
        "_from_auto", "_from_pipeline", "code_revision", "return_unused_kwargs", "config",
        "tp_plan", "key_mapping", "weights_only", "adapter_kwargs", "adapter_name",
    }
)  # fmt: skip
#: Keywords about where to fetch from: not returned as a model's unused keywords.
_HUB = frozenset(
    {
        "cache_dir", "force_download", "local_files_only", "token", "use_auth_token",
        "revision", "proxies", "subfolder", "trust_remote_code", "resume_download", "mirror",
        "code_revision", "return_unused_kwargs", "_from_auto", "_from_pipeline", "_commit_hash",
    }
)  # fmt: skip
#: Parameters a stand-in may have for a few CPU steps (a larger default keeps two layers).
AFFORDABLE_PARAMETERS = 400_000_000
_LAYER_FIELDS = ("num_hidden_layers", "n_layer", "num_layers", "num_decoder_layers")


class HubStandIns:
    """Patches transformers' ``from_pretrained`` entry points as they are imported."""

    def __init__(self, note: Note, patch: Patch) -> None:
        self.note = note
        self.patch = patch
        self.checked_hub = False
        self.offline = False  # the hub's host does not resolve: the libraries run offline
        #: Tokenizers being fetched: the configuration a tokenizer reads to pick
        #: its class gets no stand-in (a tokenizer without its files is the
        #: byte-level stand-in, not a real class with an empty vocabulary).
        self.tokenizing = 0

    def offline_when_unreachable(self) -> bool:
        """Once per run: when the hub's host does not even resolve, put the hub
        libraries in their offline mode, so that a fetch fails at once (from the
        local cache) instead of after half a minute of retries per file."""
        if self.checked_hub:
            return self.offline
        self.checked_hub = True
        import socket
        from urllib.parse import urlparse

        try:
            from huggingface_hub import constants
        except ImportError:
            return False
        host = urlparse(str(getattr(constants, "ENDPOINT", "https://huggingface.co"))).hostname
        if not host or getattr(constants, "HF_HUB_OFFLINE", False):
            self.offline = bool(host)
            return self.offline
        try:
            socket.getaddrinfo(host, 443)
        except OSError:
            self.patch(constants, "HF_HUB_OFFLINE", True)
            self.offline = True
            self.note(
                f"{host} does not resolve: the Hugging Face libraries run offline (cache only)"
            )
        return self.offline

    def callbacks(self) -> dict[str, Callable[[ModuleType], None]]:
        return {
            "transformers.configuration_utils": self._configurations,
            "transformers.models.auto.configuration_auto": self._auto_configurations,
            "transformers.modeling_utils": self._models,
            "transformers.models.auto.modeling_auto": self._auto_models,
            "transformers.tokenization_utils_base": self._tokenizers,
            "transformers.models.auto.tokenization_auto": self._auto_tokenizers,
        }

    # -- configurations --------------------------------------------------------------
    def _configurations(self, module: ModuleType) -> None:
        base = getattr(module, "PreTrainedConfig", None) or getattr(
            module, "PretrainedConfig", None
        )
        if isinstance(base, type):
            self._wrap(base, self._configuration)

    def _auto_configurations(self, module: ModuleType) -> None:
        auto = getattr(module, "AutoConfig", None)
        if isinstance(auto, type):
            self._wrap(auto, self._configuration)

    def _configuration(
        self, cls: type, name: str, kwargs: dict[str, Any], error: BaseException
    ) -> Any:
        if self.tokenizing:
            return None
        config = stand_in_config(name, kwargs, cls)
        if config is None:
            return None
        self.note(
            f"stand-in configuration: {name!r} could not be fetched ({one_line(error)}); "
            f"transformers' default {type(config).__name__}{_shrunk(config)} takes its place"
        )
        if kwargs.get("return_unused_kwargs"):  # (config, the keywords meant for the model)
            unused = {
                key: value
                for key, value in kwargs.items()
                if key not in _HUB and not hasattr(config, key)
            }
            return config, unused
        return config

    # -- models ----------------------------------------------------------------------
    def _models(self, module: ModuleType) -> None:
        base = getattr(module, "PreTrainedModel", None)
        if isinstance(base, type):
            self._wrap(base, self._model)

    def _auto_models(self, module: ModuleType) -> None:
        """Each ``AutoModel*`` class holds its own copy of ``from_pretrained``
        (transformers copies the base's when it makes the class): each copy is
        wrapped, and unwrapped after the run."""
        for value in list(vars(module).values()):
            own = isinstance(value, type) and "from_pretrained" in value.__dict__
            if own and hasattr(value, "_model_mapping"):
                self._wrap(value, self._model)

    def _model(self, cls: type, name: str, kwargs: dict[str, Any], error: BaseException) -> Any:
        config = kwargs.get("config")
        if config is None or isinstance(config, str):
            config = stand_in_config(name, kwargs, None)
        if config is None:
            return None
        model = (
            cls.from_config(config)  # type: ignore[attr-defined]
            if hasattr(cls, "_model_mapping")
            else cls._from_config(config)  # type: ignore[attr-defined]
        )
        dtype = kwargs.get("dtype", kwargs.get("torch_dtype"))
        if dtype is not None and not isinstance(dtype, str):
            model = model.to(dtype)
        self.note(
            f"stand-in weights: {name!r} could not be fetched ({one_line(error)}); a randomly "
            f"initialised {type(model).__name__} of {type(config).__name__}'s default size"
            f"{_shrunk(config)} takes its place (--no-stand-ins to fail instead)"
        )
        return model

    # -- tokenizers ------------------------------------------------------------------
    def _tokenizers(self, module: ModuleType) -> None:
        base = getattr(module, "PreTrainedTokenizerBase", None)
        if isinstance(base, type):
            self._wrap(base, self._tokenizer)

    def _auto_tokenizers(self, module: ModuleType) -> None:
        auto = getattr(module, "AutoTokenizer", None)
        if isinstance(auto, type):
            self._wrap(auto, self._tokenizer)

    def _tokenizer(self, cls: type, name: str, kwargs: dict[str, Any], error: BaseException) -> Any:
        tokenizer = byte_tokenizer(int(kwargs.get("model_max_length", 512)))
        self.note(
            f"stand-in tokenizer: {name!r} could not be fetched ({one_line(error)}); a "
            f"byte-level tokenizer ({len(tokenizer)} ids) takes its place"
        )
        return tokenizer

    # -- the wrapping ----------------------------------------------------------------
    @contextlib.contextmanager
    def _fetching(self, tokenizer: bool) -> Iterator[None]:
        self.tokenizing += tokenizer
        try:
            yield
        finally:
            self.tokenizing -= tokenizer

    def _wrap(
        self, cls: type, build: Callable[[type, str, dict[str, Any], BaseException], Any]
    ) -> None:
        """``cls.from_pretrained``, made to build the stand-in when fetching fails."""
        original = cls.__dict__.get("from_pretrained")
        if not isinstance(original, classmethod) or getattr(
            original.__func__, "__torchwise_stand_in__", False
        ):
            return
        function = original.__func__

        @functools.wraps(function)
        def from_pretrained(klass: type, name: Any, *args: Any, **kwargs: Any) -> Any:
            self.offline_when_unreachable()
            try:
                with self._fetching(tokenizer=build == self._tokenizer):
                    return function(klass, name, *args, **kwargs)
            except Exception as error:
                if not download_failed(error):
                    raise
                made = build(klass, str(name), kwargs, error)
                if made is None:
                    raise
                return made

        from_pretrained.__torchwise_stand_in__ = True  # type: ignore[attr-defined]
        self.patch(cls, "from_pretrained", classmethod(from_pretrained))


def model_type_of(name: str) -> str | None:
    """The model type a hub name shows (``"FacebookAI/roberta-base"`` -> ``roberta``):
    the longest of transformers' model types found in its last part."""
    from transformers.models.auto import configuration_auto

    names: dict[str, str] = getattr(configuration_auto, "CONFIG_MAPPING_NAMES")  # noqa: B009
    last = name.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].lower()
    spellings = {last, last.replace("-", "_"), last.replace("_", "-")}
    found = [
        model_type
        for model_type in names
        if any(_shows(model_type, spelling) for spelling in spellings)
    ]
    return max(found, key=len) if found else None


def _shows(model_type: str, name: str) -> bool:
    """A long type anywhere in the name (``distilgpt2``); a short one (``t5``,
    ``vit``, ``opt``) only as a word of it (not the ``opt`` in ``adaptive``)."""
    if len(model_type) > 3:
        return model_type in name
    return re.search(rf"(^|[-_.]){re.escape(model_type)}($|[-_.])", name) is not None


def stand_in_config(name: str, kwargs: dict[str, Any], cls: type | None) -> Any:
    """transformers' default configuration of the model type the name shows,
    with the script's configuration keywords; None when the type is unknown."""
    from transformers import AutoConfig

    settings = {key: value for key, value in kwargs.items() if key not in _LOADING}
    model_type = getattr(cls, "model_type", "") or model_type_of(name)
    if not model_type:
        return None
    try:
        config = AutoConfig.for_model(model_type, **settings)
    except (ValueError, TypeError, KeyError):
        return None
    _afford(config)
    return config


def _afford(config: Any) -> None:
    """Keep two layers of a default configuration too large for a few CPU steps."""
    hidden = int(getattr(config, "hidden_size", 0) or getattr(config, "n_embd", 0) or 0)
    vocab = int(getattr(config, "vocab_size", 0) or 0)
    for field in _LAYER_FIELDS:
        layers = getattr(config, field, None)
        size = 12 * (layers or 0) * hidden * hidden + vocab * hidden
        if isinstance(layers, int) and layers > 2 and size > AFFORDABLE_PARAMETERS:
            config.torchwise_layers = layers
            setattr(config, field, 2)


def _shrunk(config: Any) -> str:
    layers = getattr(config, "torchwise_layers", None)
    return f" (with 2 of its {layers} layers, to fit a few CPU steps)" if layers else ""


def byte_tokenizer(max_length: int) -> Any:
    """A fast tokenizer over the 256 bytes and the usual special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<s>", "</s>"]
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {token: index for index, token in enumerate([*specials, *alphabet])}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=backend,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        bos_token="<s>",
        eos_token="</s>",
        model_max_length=max_length,
    )
