__torchport_emulated__ = True
__all__ = []
