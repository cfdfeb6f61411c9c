"""The one ImageFolder scanner: which folders are classes and which files are images.

Both input paths -- the trainer's simple loader (:mod:`torchport.train.data`) and torchport.data
(``data pack``, the fast ImageFolder loader) -- list folders through this module, so they agree on
the class list and therefore on every label. Rules:

* classes are the sorted, non-hidden sub-directories of the split root (``.ipynb_checkpoints``,
  ``.git`` and other dot-folders are not classes);
* images are the non-hidden files of a class folder whose extension is in :data:`IMAGE_EXTENSIONS`
  (case-insensitive); other non-hidden files are returned separately so callers can count or
  refuse them;
* a broken symbolic link (missing target, or a loop such as a link to itself) is never a class and
  never silently dropped: one named like an image is listed as an image, so reading it fails and
  is reported with the other unreadable files; :func:`broken_links` lists the rest;
* a symbolic link leading out of the data set (a class folder or an image linked in from elsewhere), or a
  folder link back onto the data set or one of its parents (``root/cls/loop -> root/cls``, ``root/x -> root``:
  a loop) is never read: not a class, not an image; :func:`refused_links` lists each with its reason, and
  the walk is one level deep, so a loop cannot make it hang.

Example::

    classes = list_classes("data/train")
    images, others = list_class_files("data/train/" + classes[0])
"""

from __future__ import annotations

import os

__all__ = ["SPLITS", "IMAGE_EXTENSIONS", "is_image_file", "list_classes", "list_class_files", "broken_links", "refused_links"]

#: Split folders of a data set (``DATA/train``, ``DATA/val``, ``DATA/test``), each an ImageFolder.
SPLITS = ("train", "val", "test")

#: Extensions indexed as images by every torchport loader.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def is_image_file(name: str) -> bool:
    """True for a non-hidden file name with an image extension."""
    return not name.startswith(".") and name.lower().endswith(IMAGE_EXTENSIONS)


def _kind(entry: os.DirEntry, root: str | os.PathLike | None = None) -> str | None:
    """``"dir"``, ``"file"``, ``"broken"`` (a symlink whose target is missing or loops), ``"loop"`` (a folder link
    onto ``root``, a folder above it or above the link itself), ``"outside"`` (a link out of ``root``) or None."""
    try:
        kind = "dir" if entry.is_dir() else "file" if entry.is_file() else None
    except OSError:   # ELOOP: a link to itself, or a cycle of links
        kind = None
    if kind is None:
        return "broken" if entry.is_symlink() else None
    if root is not None and entry.is_symlink():
        from torchport.paths import inside

        real = os.path.realpath(entry.path)
        if kind == "dir" and (inside(root, real) or inside(os.path.dirname(entry.path), real)):
            return "loop"
        if not inside(real, root):
            return "outside"
    return kind


def _confine(folder: str | os.PathLike) -> str:
    """The data set a scanned ImageFolder belongs to: ``DATA`` for a split ``DATA/train`` (so ``val`` may link to
    ``train``'s images), else the folder itself. Links must stay inside it."""
    folder = os.path.abspath(folder)
    return os.path.dirname(folder) if os.path.basename(folder) in SPLITS else folder


def _root_of(class_dir: str | os.PathLike, root: str | os.PathLike | None) -> str:
    return _confine(root if root is not None else os.path.dirname(os.path.abspath(class_dir)))


def list_classes(root: str | os.PathLike) -> list[str]:
    """Sorted names of the non-hidden sub-directories of ``root`` (OSError on ``root`` itself propagates);
    folder links out of ``root`` or back onto it are not classes (:func:`refused_links`)."""
    top = _confine(root)
    with os.scandir(root) as it:
        return sorted(e.name for e in it if not e.name.startswith(".") and _kind(e, top) == "dir")


def broken_links(folder: str | os.PathLike) -> list[str]:
    """Paths of the non-hidden broken symbolic links directly in ``folder`` (for reports)."""
    with os.scandir(folder) as it:
        return sorted(os.path.join(folder, e.name) for e in it if not e.name.startswith(".") and _kind(e) == "broken")


def refused_links(root: str | os.PathLike) -> list[tuple[str, str]]:
    """``[(path, reason)]`` of the symbolic links in ``root`` and its class folders that are not read: links
    out of the data set, and folder links back onto it (loops). One line each, for the reports."""
    out: list[tuple[str, str]] = []
    top = _confine(root)

    def scan(folder):
        try:
            with os.scandir(folder) as it:
                entries = sorted((e for e in it if not e.name.startswith(".")), key=lambda e: e.name)
        except OSError:
            return []
        for e in entries:
            kind = _kind(e, top)
            if kind == "loop":
                out.append((e.path, f"symbolic link back onto the data set ({os.path.realpath(e.path)}: a loop); "
                                    "not read -- remove the link"))
            elif kind == "outside":
                out.append((e.path, f"symbolic link to {os.path.realpath(e.path)}, outside the data set {top}; "
                                    "not read -- copy the file in or point the data set at its real folder"))
        return [e.path for e in entries if _kind(e, top) == "dir"]

    for class_dir in scan(root):
        scan(class_dir)
    return out


def list_class_files(class_dir: str | os.PathLike, root: str | os.PathLike | None = None) -> tuple[list[str], list[str]]:
    """``(images, others)``: sorted names of the image files and of the other non-hidden files
    (broken symbolic links included, so they are reported rather than silently dropped). Links out of the
    data set ``root`` (default: the folder above ``class_dir``) are neither (:func:`refused_links`)."""
    top = _root_of(class_dir, root)
    with os.scandir(class_dir) as it:
        files = sorted(e.name for e in it if not e.name.startswith(".") and _kind(e, top) in ("file", "broken"))
    images = [f for f in files if is_image_file(f)]
    others = [f for f in files if not is_image_file(f)]
    return images, others
