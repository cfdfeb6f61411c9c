"""``CannPackageManager`` (emulated): there is no CANN package, so no msprof DB export."""

__torchport_emulated__ = True
__all__ = ["CannPackageManager"]


class CannPackageManager:
    """What the installed CANN supports: nothing on the emulator (``ExportType.Db`` needs msprof)."""

    SUPPORT_EXPORT_DB = False

    @classmethod
    def is_support_default_export_db(cls) -> bool:
        return cls.SUPPORT_EXPORT_DB
