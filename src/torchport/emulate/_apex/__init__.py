"""The ``apex`` stand-in: served by the emulator's import hook (``_standin.py``) only while the
emulator is on and no real apex is installed, so Ascend ModelZoo scripts (``from apex import amp``)
run unchanged on the emulated device. Only ``apex.amp`` is provided; see :mod:`apex.amp` here."""

__torchport_emulated__ = True
