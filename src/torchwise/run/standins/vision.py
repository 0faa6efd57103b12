"""Synthetic stand-ins for torchvision's datasets whose files are not there.

A dataset class of torchvision is constructed as the script wrote it, with
``download=False``: when its files are there, it is the real dataset and
nothing changes. When they are not (the constructor raises torchvision's
"Dataset not found" or a missing file or folder), the object becomes a
stand-in of the same class: the real length of the split, images of the real
size and mode as PIL images (so the script's own transforms run on them),
labels over the real number of classes, and the attributes scripts read
(``classes``, ``class_to_idx``, ``targets``, ``data``, ``samples``). Items are
made from their index with a private generator: the same index gives the
same item, and the script's random state is not touched.

Nothing is downloaded: a few steps do not need the real data, and a run
should not spend minutes fetching it. ``--no-stand-ins`` runs with the real
data only (the script then downloads, or fails, as it would).
"""

from __future__ import annotations

import inspect
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

#: What a missing dataset looks like when torchvision raises it.
_MISSING_WORDS = ("not found", "download", "corrupted", "no such file", "couldn't find")


@dataclass(frozen=True)
class ImageSet:
    """What one of torchvision's image classification datasets holds."""

    size: tuple[int, int]  # (width, height), as PIL gives it
    mode: str  # "L" or "RGB"
    classes: int
    lengths: dict[str, int]  # split -> items; "train"/"test" for ``train=True/False``
    default_split: str = "train"
    #: Per split, when the split changes the classes (EMNIST).
    split_classes: dict[str, int] = field(default_factory=dict)
    #: The label container of ``.targets``: "list" (CIFAR), "tensor" (MNIST),
    #: "array" (SVHN's ``.labels``).
    targets: str = "list"
    #: Layout of ``.data``: "hw" (MNIST), "hwc" (CIFAR), "chw" (SVHN, STL10), "" none.
    data: str = ""
    typical: bool = False  # the size is typical, the real images vary


_MNIST = ImageSet((28, 28), "L", 10, {"train": 60000, "test": 10000}, targets="tensor", data="hw")
_CIFAR = {"train": 50000, "test": 10000}

#: torchvision.datasets class name -> what it holds.
IMAGE_SETS: dict[str, ImageSet] = {
    "MNIST": _MNIST,
    "FashionMNIST": _MNIST,
    "KMNIST": _MNIST,
    "QMNIST": ImageSet(
        (28, 28), "L", 10, {"train": 60000, "test": 60000}, targets="tensor", data="hw"
    ),
    "EMNIST": ImageSet(
        (28, 28),
        "L",
        47,
        {"train": 112800, "test": 18800},
        targets="tensor",
        data="hw",
        split_classes={
            "byclass": 62,
            "bymerge": 47,
            "balanced": 47,
            "letters": 26,
            "digits": 10,
            "mnist": 10,
        },
    ),
    "CIFAR10": ImageSet((32, 32), "RGB", 10, _CIFAR, data="hwc"),
    "CIFAR100": ImageSet((32, 32), "RGB", 100, _CIFAR, data="hwc"),
    "SVHN": ImageSet(
        (32, 32),
        "RGB",
        10,
        {"train": 73257, "test": 26032, "extra": 531131},
        targets="array",
        data="chw",
    ),
    "STL10": ImageSet(
        (96, 96),
        "RGB",
        10,
        {"train": 5000, "test": 8000, "unlabeled": 100000, "train+unlabeled": 105000},
        targets="array",
        data="chw",
    ),
    "EuroSAT": ImageSet((64, 64), "RGB", 10, {"train": 27000}),
    "GTSRB": ImageSet((48, 48), "RGB", 43, {"train": 26640, "test": 12630}, typical=True),
    "Flowers102": ImageSet(
        (500, 500), "RGB", 102, {"train": 1020, "val": 1020, "test": 6149}, typical=True
    ),
    "Food101": ImageSet((512, 512), "RGB", 101, {"train": 75750, "test": 25250}, typical=True),
    "OxfordIIITPet": ImageSet(
        (500, 375), "RGB", 37, {"trainval": 3680, "test": 3669}, "trainval", typical=True
    ),
    "Caltech101": ImageSet((300, 200), "RGB", 101, {"train": 8677}, typical=True),
    "ImageNet": ImageSet((500, 375), "RGB", 1000, {"train": 1281167, "val": 50000}, typical=True),
    "Places365": ImageSet(
        (256, 256), "RGB", 365, {"train-standard": 1803460, "val": 36500}, "train-standard"
    ),
    "Omniglot": ImageSet((105, 105), "L", 964, {"train": 19280, "test": 13180}),
}

#: CelebA: 40 binary attributes, 10,177 identities, a box and 5 landmarks per image.
CELEBA_LENGTHS = {"train": 162770, "valid": 19867, "test": 19962, "all": 202599}

_IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".ppm", ".pgm", ".tif", ".tiff")
#: An image folder with nothing in it: this many classes and items.
FOLDER_CLASSES, FOLDER_ITEMS, FOLDER_SIZE = 2, 256, (256, 256)


def missing_files(error: BaseException) -> bool:
    """Whether a dataset constructor failed because its files are not there."""
    if isinstance(error, (FileNotFoundError, NotADirectoryError)):
        return True
    return isinstance(error, RuntimeError) and any(
        word in str(error).lower() for word in _MISSING_WORDS
    )


Patch = Callable[[type, str, Any], None]
Note = Callable[[str], None]
#: (instance, bound arguments of the real constructor, the patched class) ->
#: what the note says, or None when no stand-in fits (the real error is raised).
Builder = Callable[[Any, dict[str, Any], type], "str | None"]


def patch_torchvision_datasets(module: ModuleType, note: Note, patch: Patch) -> None:
    """Make torchvision's dataset classes stand in when their files are missing."""
    for name in IMAGE_SETS:
        cls = getattr(module, name, None)
        if isinstance(cls, type) and "__init__" in cls.__dict__:
            patch(cls, "__init__", standing_in(cls, note, _image_set))
    for name, build in (("CelebA", _celeba), ("DatasetFolder", _image_folder)):
        cls = getattr(module, name, None)
        if isinstance(cls, type) and "__init__" in cls.__dict__:
            patch(cls, "__init__", standing_in(cls, note, build))


def standing_in(cls: type, note: Note, build: Builder) -> Callable[..., None]:
    """``cls.__init__``, made to build a stand-in when the dataset's files are missing."""
    original = cls.__dict__["__init__"]
    signature = inspect.signature(original)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if getattr(self, "_torchwise_constructing", False):
            original(self, *args, **kwargs)  # a subclass's constructor is deciding
            return
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:
            original(self, *args, **kwargs)  # the script's own mistake, raised as usual
            return
        arguments = dict(bound.arguments)
        wanted_download = bool(arguments.get("download", False))
        if "download" in signature.parameters:
            bound.arguments["download"] = False
        object.__setattr__(self, "_torchwise_constructing", True)
        try:
            original(*bound.args, **bound.kwargs)
        except Exception as error:
            if not missing_files(error):
                raise
            said = build(self, {**_flatten(arguments), "_download": wanted_download}, cls)
            if said is None:
                raise
            note(said)
        finally:
            object.__setattr__(self, "_torchwise_constructing", False)

    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    return __init__


def _flatten(arguments: dict[str, Any]) -> dict[str, Any]:
    """Bound arguments with ``**kwargs`` spread out (``EMNIST(root, split, **kwargs)``)."""
    flat = {key: value for key, value in arguments.items() if key != "kwargs"}
    extra = arguments.get("kwargs")
    if isinstance(extra, dict):
        flat.update(extra)
    return flat


def _split(spec: ImageSet, arguments: dict[str, Any]) -> str:
    split = arguments.get("split")
    if isinstance(split, str) and split in spec.lengths:
        return split
    if "train" in arguments and "train" in spec.lengths and "test" in spec.lengths:
        return "train" if arguments["train"] else "test"
    if "background" in arguments:  # Omniglot
        return "train" if arguments["background"] else "test"
    return spec.default_split if spec.default_split in spec.lengths else next(iter(spec.lengths))


def _image_set(dataset: Any, arguments: dict[str, Any], base: type) -> str | None:
    """One of IMAGE_SETS, picked by the dataset's own class: ``CIFAR100`` and
    ``FashionMNIST`` have no constructor of their own, their parent's runs."""
    name = next(
        (
            klass.__name__
            for klass in type(dataset).__mro__
            if klass.__name__ in IMAGE_SETS and klass.__module__.startswith("torchvision.")
        ),
        base.__name__,
    )
    spec = IMAGE_SETS[name]
    split = _split(spec, arguments)
    classes = spec.split_classes.get(str(arguments.get("split")), spec.classes)
    first = 1 if name == "EMNIST" and arguments.get("split") == "letters" else 0
    size = spec.size
    items = _ImageItems(spec.lengths[split], size, spec.mode, zlib.crc32(name.encode()))
    _become(dataset, items, classes, first, spec, arguments, base)
    shown = f"{size[0]}x{size[1]} {'grey' if spec.mode == 'L' else 'RGB'}"
    return (
        f"stand-in data: {name}(root={str(arguments.get('root'))!r}) has no files there; "
        f"{spec.lengths[split]:,} synthetic {shown} images of {classes} classes "
        f"({split} split{', typical size' if spec.typical else ''}) take its place, "
        f"nothing is downloaded{_download_hint(arguments)} (--no-stand-ins runs only "
        "on the real data)"
    )


def _download_hint(arguments: dict[str, Any]) -> str:
    return " although the script asks for it" if arguments.get("_download") else ""


@dataclass(frozen=True)
class _ImageItems:
    len_: int
    size: tuple[int, int]
    mode: str
    seed: int

    def pixels(self, index: int) -> np.ndarray:
        rng = np.random.default_rng((self.seed, index))
        width, height = self.size
        shape = (height, width) if self.mode == "L" else (height, width, 3)
        return rng.integers(0, 256, size=shape, dtype=np.uint8)

    def image(self, index: int) -> Any:
        from PIL import Image

        return Image.fromarray(self.pixels(index), mode=None)


def _become(
    dataset: Any,
    items: _ImageItems,
    classes: int,
    first: int,
    spec: ImageSet,
    arguments: dict[str, Any],
    base: type,
) -> None:
    """Turn the half-built dataset into a stand-in of its own class (a
    subclass the script wrote keeps its own ``__getitem__``, reading the
    stand-in's ``data`` and ``targets``)."""
    _base_attributes(dataset, arguments)
    cls = type(dataset)
    labels = np.arange(items.len_, dtype=np.int64) % classes + first

    def __len__(self: Any) -> int:
        return items.len_

    def __getitem__(self: Any, index: int) -> tuple[Any, Any]:
        if index < 0:
            index += items.len_
        if not 0 <= index < items.len_:
            raise IndexError(f"index {index} is out of range for {items.len_} items")
        image, target = items.image(index), int(labels[index])
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target

    namespace = _stand_in_namespace(cls, base, __getitem__, __len__)
    if spec.data:
        namespace["data"] = _lazy("data", lambda: _data_of(items, spec.data))
    container = _labels_as(labels, spec.targets)
    namespace["labels" if spec.targets == "array" else "targets"] = _lazy(
        "labels" if spec.targets == "array" else "targets", lambda: container
    )
    dataset.__class__ = type(cls.__name__, (cls,), namespace)
    names = [f"class {index + first}" for index in range(classes)]
    dataset.__dict__.setdefault("classes", names)
    dataset.__dict__.setdefault("class_to_idx", {n: i + first for i, n in enumerate(names)})
    dataset.__dict__.setdefault("train", arguments.get("train", True))
    if "split" in arguments:
        dataset.__dict__.setdefault("split", arguments["split"])


def _stand_in_namespace(
    cls: type, base: type, getitem: Callable[..., Any], length: Callable[[Any], int]
) -> dict[str, Any]:
    namespace: dict[str, Any] = {
        "_torchwise_stand_in": True,
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
    }
    if getattr(cls, "__getitem__", None) is getattr(base, "__getitem__", None):
        namespace["__getitem__"] = getitem
    if getattr(cls, "__len__", None) is getattr(base, "__len__", None):
        namespace["__len__"] = length
    return namespace


def _labels_as(labels: np.ndarray, kind: str) -> Any:
    if kind == "tensor":
        import torch

        return torch.from_numpy(labels.copy())
    if kind == "array":
        return labels.copy()
    return labels.tolist()


def _data_of(items: _ImageItems, layout: str) -> Any:
    stacked = np.stack([items.pixels(index) for index in range(items.len_)])
    if layout == "hw":
        import torch

        return torch.from_numpy(stacked)
    if layout == "chw":
        return np.ascontiguousarray(stacked.transpose(0, 3, 1, 2))
    return stacked


def _lazy(name: str, make: Callable[[], Any]) -> property:
    """An attribute made on first read (``.data`` of 50,000 images costs memory
    only when a script reads it); the script may assign it as usual."""
    key = f"_torchwise_{name}"

    def get(self: Any) -> Any:
        if key not in self.__dict__:
            self.__dict__[key] = make()
        return self.__dict__[key]

    def set_(self: Any, value: Any) -> None:
        self.__dict__[key] = value

    return property(get, set_)


def _base_attributes(dataset: Any, arguments: dict[str, Any]) -> None:
    """What ``VisionDataset.__init__`` sets, in case the constructor failed first."""
    root = arguments.get("root")
    dataset.__dict__.setdefault("root", root)
    dataset.__dict__.setdefault("transform", arguments.get("transform"))
    dataset.__dict__.setdefault("target_transform", arguments.get("target_transform"))
    dataset.__dict__.setdefault("transforms", arguments.get("transforms"))


def _celeba(dataset: Any, arguments: dict[str, Any], base: type) -> str | None:
    import torch

    split = arguments.get("split", "train")
    length = CELEBA_LENGTHS.get(str(split), CELEBA_LENGTHS["train"])
    target_type = arguments.get("target_type", "attr")
    kinds = list(target_type) if isinstance(target_type, (list, tuple)) else [target_type]
    if any(kind not in ("attr", "identity", "bbox", "landmarks") for kind in kinds):
        return None
    _base_attributes(dataset, arguments)
    items = _ImageItems(len_=length, size=(178, 218), mode="RGB", seed=4321)
    cls = type(dataset)

    def target_of(index: int, kind: str) -> Any:
        generator = torch.Generator().manual_seed(index)
        if kind == "attr":
            return torch.randint(0, 2, (40,), generator=generator)
        if kind == "identity":
            return torch.randint(1, 10178, (), generator=generator)
        if kind == "bbox":
            return torch.randint(0, 178, (4,), generator=generator)
        return torch.randint(0, 178, (10,), generator=generator)

    def __getitem__(self: Any, index: int) -> tuple[Any, Any]:
        if not -length <= index < length:
            raise IndexError(f"index {index} is out of range for {length} items")
        index %= length
        image = items.image(index)
        targets = [target_of(index, kind) for kind in kinds]
        if self.transform is not None:
            image = self.transform(image)
        target: Any = None
        if targets:
            target = tuple(targets) if len(targets) > 1 else targets[0]
            if self.target_transform is not None:
                target = self.target_transform(target)
        return image, target

    dataset.__class__ = type(
        cls.__name__, (cls,), _stand_in_namespace(cls, base, __getitem__, lambda self: length)
    )
    dataset.__dict__.setdefault("split", split)
    dataset.__dict__.setdefault("target_type", kinds)
    dataset.__dict__.setdefault("attr_names", [f"attribute_{i}" for i in range(40)])
    return (
        f"stand-in data: CelebA(root={str(arguments.get('root'))!r}) has no files there; "
        f"{length:,} synthetic 178x218 RGB images with {', '.join(kinds) or 'no'} targets "
        f"({split} split) take its place, nothing is downloaded{_download_hint(arguments)} "
        "(--no-stand-ins runs only on the real data)"
    )


def _image_folder(dataset: Any, arguments: dict[str, Any], base: type) -> str | None:
    """An ``ImageFolder`` (or a ``DatasetFolder`` of images) whose folder is missing
    or empty: two classes of 256x256 RGB images, 128 each."""
    loader = arguments.get("loader")
    extensions = arguments.get("extensions")
    images = extensions is None or any(
        str(extension).lower() in (".jpg", ".jpeg", ".png", ".bmp", ".webp")
        for extension in extensions
    )
    if not images and getattr(loader, "__name__", "") not in ("default_loader", "pil_loader"):
        return None  # a folder of other files: their items cannot be guessed
    _base_attributes(dataset, arguments)
    items = _ImageItems(len_=FOLDER_ITEMS, size=FOLDER_SIZE, mode="RGB", seed=99)
    names = [f"class_{index}" for index in range(FOLDER_CLASSES)]
    labels = [index % FOLDER_CLASSES for index in range(FOLDER_ITEMS)]
    root = str(arguments.get("root"))
    samples = [(f"{root}/{names[label]}/{index}.png", label) for index, label in enumerate(labels)]
    cls = type(dataset)

    def __getitem__(self: Any, index: int) -> tuple[Any, Any]:
        path, target = self.samples[index]
        del path
        image = items.image(index % FOLDER_ITEMS)
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target

    dataset.__class__ = type(
        cls.__name__,
        (cls,),
        _stand_in_namespace(cls, base, __getitem__, lambda self: len(self.samples)),
    )
    dataset.__dict__.update(
        classes=names,
        class_to_idx={name: index for index, name in enumerate(names)},
        samples=samples,
        imgs=samples,
        targets=labels,
        extensions=extensions,
    )
    if loader is not None:
        dataset.__dict__["loader"] = loader
    return (
        f"stand-in data: {cls.__name__}({root!r}) has no class folders of images there; "
        f"{FOLDER_ITEMS} synthetic {FOLDER_SIZE[0]}x{FOLDER_SIZE[1]} RGB images in "
        f"{FOLDER_CLASSES} classes take its place (the real class count is unknown; "
        "--no-stand-ins runs only on the real data)"
    )
