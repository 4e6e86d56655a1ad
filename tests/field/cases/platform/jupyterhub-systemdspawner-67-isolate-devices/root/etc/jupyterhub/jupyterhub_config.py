c.JupyterHub.spawner_class = "systemdspawner.SystemdSpawner"
c.SystemdSpawner.mem_limit = "4G"
c.SystemdSpawner.isolate_tmp = True
c.SystemdSpawner.isolate_devices = True
