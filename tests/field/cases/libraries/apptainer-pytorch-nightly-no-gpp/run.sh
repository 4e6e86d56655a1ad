singularity run --containall pytorch-nightly_latest.sif python -c \
  'import torch; import torchvision; x=torch.ones(1,3,224,224); model=torchvision.models.resnet50(); compiled=torch.compile(model); compiled(x)'
