docker run --rm --gpus all ghcr.io/pytorch/pytorch-nightly:2.10.0.dev20251209-cuda12.9-cudnn9-runtime bash -c "python -c ..."
