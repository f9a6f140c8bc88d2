"""Planning a node's containerd change (`node`) and the order nodes get it
(`rollout`): pure, below the components and the offline plan."""
