/* stand-in: the CUDA 11.3 runtime headers in the environment */
