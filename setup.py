"""Only here to ship ``torchport-emulate.pth`` (everything else is in pyproject.toml).

The .pth runs ``torchport_emulate_boot`` at interpreter start; it does nothing unless
``TORCHPORT_EMULATE`` is set (then ``import torch_npu`` works before ``import torch``).
"""

import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "torchport-emulate.pth"


class BuildPyWithPth(build_py):
    def run(self):
        super().run()
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "src", PTH)
        self.mkpath(self.build_lib)
        shutil.copyfile(src, os.path.join(self.build_lib, PTH))

    def get_outputs(self, include_bytecode=1):
        return super().get_outputs(include_bytecode) + [os.path.join(self.build_lib, PTH)]

    def get_output_mapping(self):
        mapping = super().get_output_mapping()
        mapping[os.path.join(self.build_lib, PTH)] = os.path.join("src", PTH)
        return mapping


try:  # editable installs (pip install -e .) get the .pth too
    from setuptools.command.editable_wheel import editable_wheel

    class EditableWithPth(editable_wheel):
        def _install_namespaces(self, installation_dir, pth_prefix):
            super()._install_namespaces(installation_dir, pth_prefix)
            src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "src", PTH)
            shutil.copyfile(src, os.path.join(installation_dir, PTH))

    CMDCLASS = {"build_py": BuildPyWithPth, "editable_wheel": EditableWithPth}
except ImportError:  # pragma: no cover - old setuptools
    CMDCLASS = {"build_py": BuildPyWithPth}

setup(cmdclass=CMDCLASS)
