"""The distributions: their containerd layouts (profiles), the K3s/RKE2 and k0s
renderers, the model baselines and Docker's daemon.json."""
