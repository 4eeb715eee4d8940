"""STAND-IN for torch in tests of the trtllm probe: a 'GPU' the image's torch would see."""


class cuda:  # noqa: N801 - torch's own name
    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def get_device_name(index: int = 0) -> str:
        return "stand-in GPU (test)"
