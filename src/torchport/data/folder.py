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
  is reported with the other unreadable files; :func:`broken_links` lists the rest.

Example::

    classes = list_classes("data/train")
    images, others = list_class_files("data/train/" + classes[0])
"""

from __future__ import annotations

import os

__all__ = ["IMAGE_EXTENSIONS", "is_image_file", "list_classes", "list_class_files", "broken_links"]

#: Extensions indexed as images by every torchport loader.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def is_image_file(name: str) -> bool:
    """True for a non-hidden file name with an image extension."""
    return not name.startswith(".") and name.lower().endswith(IMAGE_EXTENSIONS)


def _kind(entry: os.DirEntry) -> str | None:
    """``"dir"``, ``"file"``, ``"broken"`` (a symlink whose target is missing or loops) or None."""
    try:
        if entry.is_dir():
            return "dir"
        if entry.is_file():
            return "file"
    except OSError:   # ELOOP: a link to itself, or a cycle of links
        pass
    return "broken" if entry.is_symlink() else None


def list_classes(root: str | os.PathLike) -> list[str]:
    """Sorted names of the non-hidden sub-directories of ``root`` (OSError on ``root`` itself propagates)."""
    with os.scandir(root) as it:
        return sorted(e.name for e in it if not e.name.startswith(".") and _kind(e) == "dir")


def broken_links(folder: str | os.PathLike) -> list[str]:
    """Paths of the non-hidden broken symbolic links directly in ``folder`` (for reports)."""
    with os.scandir(folder) as it:
        return sorted(os.path.join(folder, e.name) for e in it if not e.name.startswith(".") and _kind(e) == "broken")


def list_class_files(class_dir: str | os.PathLike) -> tuple[list[str], list[str]]:
    """``(images, others)``: sorted names of the image files and of the other non-hidden files
    (broken symbolic links included, so they are reported rather than silently dropped)."""
    with os.scandir(class_dir) as it:
        files = sorted(e.name for e in it if not e.name.startswith(".") and _kind(e) in ("file", "broken"))
    images = [f for f in files if is_image_file(f)]
    others = [f for f in files if not is_image_file(f)]
    return images, others
