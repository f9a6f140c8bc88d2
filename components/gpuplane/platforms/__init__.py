"""The managed platforms: their profiles, detection from a Node object, and the
native inputs (EKS NodeConfig, Bottlerocket settings, AKS/GKE pools) that replace node
files there."""
