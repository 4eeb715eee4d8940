"""STAND-IN for torch in tests of the trtllm probe: a 'GPU' the image's torch would see, of
the compute capability in STANDIN_GPU_CC (default 12.1, GB10)."""

import os


class cuda:  # noqa: N801 - torch's own name
    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def get_device_name(index: int = 0) -> str:
        return "stand-in GPU (test)"

    @staticmethod
    def get_device_capability(index: int = 0) -> tuple[int, int]:
        major, minor = os.environ.get("STANDIN_GPU_CC", "12.1").split(".")
        return int(major), int(minor)
