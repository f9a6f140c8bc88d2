module gpuplane.test/builds/toolkit-1.17.5

go 1.24

tool (
	github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-ctk
	github.com/NVIDIA/nvidia-container-toolkit/tools/container/nvidia-toolkit
)

require (
	github.com/NVIDIA/go-nvlib v0.6.1 // indirect
	github.com/NVIDIA/go-nvml v0.12.4-1 // indirect
	github.com/NVIDIA/nvidia-container-toolkit v1.17.5 // indirect
	github.com/cpuguy83/go-md2man/v2 v2.0.5 // indirect
	github.com/cyphar/filepath-securejoin v0.4.1 // indirect
	github.com/fsnotify/fsnotify v1.7.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/moby/sys/symlink v0.3.0 // indirect
	github.com/opencontainers/runc v1.2.5 // indirect
	github.com/opencontainers/runtime-spec v1.2.1 // indirect
	github.com/opencontainers/runtime-tools v0.9.1-0.20221107090550-2e043c6bd626 // indirect
	github.com/pelletier/go-toml v1.9.5 // indirect
	github.com/russross/blackfriday/v2 v2.1.0 // indirect
	github.com/sirupsen/logrus v1.9.3 // indirect
	github.com/syndtr/gocapability v0.0.0-20200815063812-42c35b437635 // indirect
	github.com/urfave/cli/v2 v2.27.5 // indirect
	github.com/xrash/smetrics v0.0.0-20240521201337-686a1a2994c1 // indirect
	golang.org/x/mod v0.20.0 // indirect
	golang.org/x/sys v0.28.0 // indirect
	gopkg.in/yaml.v2 v2.4.0 // indirect
	sigs.k8s.io/yaml v1.3.0 // indirect
	tags.cncf.io/container-device-interface v0.8.1 // indirect
	tags.cncf.io/container-device-interface/specs-go v0.8.0 // indirect
)
