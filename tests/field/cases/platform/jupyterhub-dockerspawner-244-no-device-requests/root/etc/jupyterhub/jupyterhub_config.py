# jupyterhub_config.py (the hub's DockerSpawner settings before the GPU request)
import os

c.JupyterHub.spawner_class = "dockerspawner.DockerSpawner"
c.DockerSpawner.image = os.environ.get("DOCKER_NOTEBOOK_IMAGE", "quay.io/jupyter/pytorch-notebook:cuda12-latest")
c.DockerSpawner.network_name = os.environ.get("DOCKER_NETWORK_NAME", "jupyterhub-network")
c.DockerSpawner.remove = True
