"""TP8xx: torchport's own comments. The engine reports these (:mod:`torchport.migrate.noqa`); no hooks."""

from __future__ import annotations

from torchport.migrate.rules.base import Rule

__all__ = ["UnusedNoqa"]


class UnusedNoqa(Rule):
    code = "TP801"
    name = "unused-noqa"
    severity = "info"
    fix = "safe"
    needles = ("noqa", "NOQA")
    summary = "Finds `# noqa: TP...` comments that silence no finding on their line."
    why = ("A suppression that silences nothing is left over from code that changed (the CUDA call it excused was "
           "fixed or moved): it hides the next finding on that line without anyone deciding so. Only torchport's "
           "own codes are judged, and only when every rule a code names was selected.")
    example = "import torch\n\nx = torch.zeros(2)  # noqa: TP101\n"
    use_instead = "import torch\n\nx = torch.zeros(2)\n"
    after_fix = "fixed (a comment: the code runs the same with it or without it, under `run` alike)"
    fix_notes = ("Safe: the unused codes are removed from the comment, the whole comment when no code is left; "
                 "the rest of the line is unchanged.")
