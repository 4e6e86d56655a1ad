docker run --gpus all --rm -it video-diffusion /bin/bash
