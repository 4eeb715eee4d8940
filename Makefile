# Conveniences; the README's two commands are scripts/demo.sh and scripts/test.sh.
.PHONY: demo test gpu-check

demo:
	bash scripts/demo.sh

test:
	bash scripts/test.sh

# On a machine with an NVIDIA GPU (see scripts/gpu-check.sh)
OUT ?= gpu-check
gpu-check:
	bash scripts/gpu-check.sh $(OUT)
