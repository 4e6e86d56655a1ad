sudo docker run --rm -it -v $(pwd):/$(pwd) -w $(pwd) --name cascademask cascademask python tools/train.py configs/mask_rcnn_r50_fpn_1x.py
