docker run --gpus all --rm --shm-size=1g -it video-diffusion /bin/bash
