"""pytest plugin (entry point ``pytest11``): fixtures for the emulated NPU. Filled in by the emulate package."""
