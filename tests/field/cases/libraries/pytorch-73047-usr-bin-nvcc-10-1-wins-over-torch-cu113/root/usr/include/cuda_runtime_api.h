/* stand-in: Ubuntu nvidia-cuda-toolkit header */
